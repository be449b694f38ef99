"""cgrad.nn's module classes."""
from cgrad.nn.modules.module import Module
from cgrad.nn.modules.linear import Bilinear, Identity, Linear
from cgrad.nn.modules.activation import (CELU, ELU, GELU, GLU, SELU, CosineSimilarity,
                                         Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                                         LeakyReLU, LogSigmoid, LogSoftmax, Mish,
                                         PairwiseDistance, PReLU, ReLU, ReLU6, RReLU, Sigmoid,
                                         SiLU, Softmax, Softmax2d, Softmin, Softplus,
                                         Softshrink, Softsign, Tanh, Tanhshrink, Threshold)
from cgrad.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss,
                                   CrossEntropyLoss, CTCLoss, GaussianNLLLoss,
                                   HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                                   MarginRankingLoss, MSELoss, MultiLabelMarginLoss,
                                   MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss,
                                   PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                                   TripletMarginLoss, TripletMarginWithDistanceLoss)
from cgrad.nn.modules.container import (ModuleDict, ModuleList, ParameterDict, ParameterList,
                                        Sequential)
from cgrad.nn.modules.conv import (Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, Fold,
                                   Unfold)
from cgrad.nn.modules.dropout import Dropout
from cgrad.nn.modules.flatten import Flatten, Unflatten
from cgrad.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d,
                                      AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, LPPool1d,
                                      LPPool2d, MaxPool1d, MaxPool2d, MaxUnpool1d, MaxUnpool2d,
                                      Upsample)
from cgrad.nn.modules.upsampling import UpsamplingBilinear2d, UpsamplingNearest2d
from cgrad.nn.modules.pixelshuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle
from cgrad.nn.modules.padding import (CircularPad1d, CircularPad2d, ConstantPad1d,
                                      ConstantPad2d, ReflectionPad1d, ReflectionPad2d,
                                      ReplicationPad1d, ReplicationPad2d, ZeroPad1d, ZeroPad2d)
from cgrad.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d,
                                           InstanceNorm2d, LayerNorm, LocalResponseNorm,
                                           RMSNorm)
from cgrad.nn.modules.sparse import Embedding, EmbeddingBag
from cgrad.nn.modules.attention import MultiheadAttention
from cgrad.nn.modules.transformer import (Transformer, TransformerDecoder,
                                          TransformerDecoderLayer, TransformerEncoder,
                                          TransformerEncoderLayer)
from cgrad.nn.modules.rnn import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell,
                                  RNNCellBase)

__all__ = [
    "Module", "Identity", "Linear", "Bilinear", "ReLU", "LeakyReLU", "ELU", "SELU", "GELU",
    "SiLU", "Sigmoid", "Tanh", "Softplus", "Softmax", "LogSoftmax", "L1Loss", "MSELoss",
    "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "Sequential", "ModuleList",
    "ModuleDict", "ParameterList", "Dropout", "Flatten", "Unflatten", "LayerNorm",
    "BatchNorm1d", "BatchNorm2d", "Embedding", "Conv1d", "Conv2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "Unfold", "Fold",
    "Upsample", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm", "LocalResponseNorm",
    "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Mish", "Softsign", "Tanhshrink",
    "LogSigmoid", "Threshold", "GLU", "Softmin", "Softmax2d", "Hardshrink", "Softshrink", "CELU",
    "RReLU", "PReLU", "CosineSimilarity", "PairwiseDistance",
    "SmoothL1Loss", "HuberLoss", "KLDivLoss", "CosineEmbeddingLoss",
    "MarginRankingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "MultiMarginLoss",
    "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "SoftMarginLoss", "HingeEmbeddingLoss",
    "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss", "ParameterDict", "EmbeddingBag",
    "MultiheadAttention", "Transformer", "TransformerEncoder",
    "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "ConvTranspose1d", "ConvTranspose2d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d",
    "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
    "ChannelShuffle", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
    "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "CircularPad1d", "CircularPad2d",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
]
