"""cgrad.nn's module classes."""
from cgrad.nn.modules.module import Module
from cgrad.nn.modules.linear import Bilinear, Identity, Linear
from cgrad.nn.modules.activation import (ELU, GELU, SELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid,
                                         SiLU, Softmax, Softplus, Tanh)
from cgrad.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss,
                                   MSELoss, NLLLoss)
from cgrad.nn.modules.container import ModuleDict, ModuleList, ParameterList, Sequential
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
from cgrad.nn.modules.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from cgrad.nn.modules.sparse import Embedding

__all__ = [
    "Module", "Identity", "Linear", "Bilinear", "ReLU", "LeakyReLU", "ELU", "SELU", "GELU",
    "SiLU", "Sigmoid", "Tanh", "Softplus", "Softmax", "LogSoftmax", "L1Loss", "MSELoss",
    "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "Sequential", "ModuleList",
    "ModuleDict", "ParameterList", "Dropout", "Flatten", "Unflatten", "LayerNorm",
    "BatchNorm1d", "BatchNorm2d", "Embedding", "Conv1d", "Conv2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "Unfold", "Fold",
    "Upsample", "ConvTranspose1d", "ConvTranspose2d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d",
    "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
    "ChannelShuffle", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
    "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "CircularPad1d", "CircularPad2d",
]
