"""The order torch's CPU kernels give equal elements (used by cgrad/ops/sorting.py).

Note [Tie order]
~~~~~~~~~~~~~~~~
Where several elements of a slice compare equal, which index torch returns depends on its
CPU algorithm, not on a documented rule:

* ``sort(stable=False)``, ``argsort`` and the quantiles' sort: ``std::sort`` on (value, index)
  pairs compared by value (NaN greatest). Slices of 16 elements or fewer are insertion-sorted,
  which is stable; longer ones are not.
* ``topk``: ``std::partial_sort`` when ``k * 64 <= n``, else ``std::nth_element`` followed by
  ``std::sort`` of the first k - 1 (only with ``sorted=True``).
* ``kthvalue``: torch's own quickselect (``quick_select_template``, median-of-three pivot).
* ``mode``: ``std::sort`` of the pairs with ``<`` (NaN not ordered), then the last element of
  the first longest run of equal values.
* ``unique(dim=...)``: ``std::sort`` of the slices' indices, compared lexicographically with
  ``<`` and ``>`` (a NaN compares as equal there, so the next element decides). Without NaNs
  the order of distinct slices is the lexicographic one, whichever algorithm.
* ``sort(stable=True)``, ``median``/``nanmedian`` (an ``nth_element`` that also compares
  indices) are stable: equal elements keep their order.

The stable cases need nothing here. For the others this module ports the algorithms
(libstdc++'s introsort, heap select, introselect and insertion sort, and torch's quickselect)
line by line on Python lists, so that the returned indices, and the gradients that follow
them, are torch's. The ports run only on the slices where the choice matters (a slice with
equal elements where it counts) and only up to BUDGET elements per call; beyond that the
callers fall back to the stable order, which torch's documentation also allows (the order of
equal elements is unspecified there). A port that would read outside its slice (possible
with ``mode``'s comparison of NaNs, undefined behaviour in C++) raises Unguarded, and the
caller falls back as well.
"""
from __future__ import annotations

BUDGET = 1 << 18        # elements per call that may go through the ports
_THRESHOLD = 16         # libstdc++'s _S_threshold


class Unguarded(Exception):
    """A port left its slice (C++ would read out of bounds): fall back."""


def _lg(n):
    return n.bit_length() - 1


def _isnan(x):
    return x != x       # noqa: PLR0124 (a Python float, int or bool)


# comparisons on (value, index) pairs, as torch's kernels write them
def asc(x, y):
    """NaN greatest, ascending (sort, topk(largest=False))."""
    return (not _isnan(x[0]) and _isnan(y[0])) or x[0] < y[0]


def desc(x, y):
    """NaN greatest, descending (sort(descending=True), topk)."""
    return (_isnan(x[0]) and not _isnan(y[0])) or x[0] > y[0]


def plain_less(x, y):
    """mode's comparison: plain < on the values (NaN unordered)."""
    return x[0] < y[0]


# ----------------------------------------------------------------------------------------
# libstdc++ (bits/stl_algo.h, bits/stl_heap.h)
# ----------------------------------------------------------------------------------------
def _insertion_sort(a, first, last, comp):
    if first == last:
        return
    for i in range(first + 1, last):
        if comp(a[i], a[first]):
            val = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _unguarded_linear_insert(a, i, comp)


def _unguarded_linear_insert(a, last, comp):
    val = a[last]
    nxt = last - 1
    while comp(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
        if nxt < 0:
            raise Unguarded
    a[last] = val


def _final_insertion_sort(a, first, last, comp):
    if last - first > _THRESHOLD:
        _insertion_sort(a, first, first + _THRESHOLD, comp)
        for i in range(first + _THRESHOLD, last):
            _unguarded_linear_insert(a, i, comp)
    else:
        _insertion_sort(a, first, last, comp)


def _move_median_to_first(a, result, x, y, z, comp):
    if comp(a[x], a[y]):
        if comp(a[y], a[z]):
            m = y
        elif comp(a[x], a[z]):
            m = z
        else:
            m = x
    elif comp(a[x], a[z]):
        m = x
    elif comp(a[y], a[z]):
        m = z
    else:
        m = y
    a[result], a[m] = a[m], a[result]


def _unguarded_partition(a, first, last, pivot, comp):
    n = len(a)
    while True:
        while comp(a[first], a[pivot]):
            first += 1
            if first >= n:
                raise Unguarded
        last -= 1
        while comp(a[pivot], a[last]):
            last -= 1
            if last < 0:
                raise Unguarded
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _unguarded_partition_pivot(a, first, last, comp):
    mid = first + (last - first) // 2
    _move_median_to_first(a, first, first + 1, mid, last - 1, comp)
    return _unguarded_partition(a, first + 1, last, first, comp)


def _push_heap(a, first, hole, top, value, comp):
    parent = (hole - 1) // 2
    while hole > top and comp(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _adjust_heap(a, first, hole, length, value, comp):
    top = second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if comp(a[first + second], a[first + second - 1]):
            second -= 1
        a[first + hole] = a[first + second]
        hole = second
    if (length & 1) == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        a[first + hole] = a[first + second - 1]
        hole = second - 1
    _push_heap(a, first, hole, top, value, comp)


def _make_heap(a, first, last, comp):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(a, first, parent, length, a[first + parent], comp)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(a, first, last, result, comp):
    value = a[result]
    a[result] = a[first]
    _adjust_heap(a, first, 0, last - first, value, comp)


def _heap_select(a, first, middle, last, comp):
    _make_heap(a, first, middle, comp)
    for i in range(middle, last):
        if comp(a[i], a[first]):
            _pop_heap(a, first, middle, i, comp)


def _sort_heap(a, first, last, comp):
    while last - first > 1:
        last -= 1
        _pop_heap(a, first, last, last, comp)


def partial_sort(a, first, middle, last, comp):
    """std::partial_sort."""
    _heap_select(a, first, middle, last, comp)
    _sort_heap(a, first, middle, comp)


def _introsort_loop(a, first, last, depth, comp):
    while last - first > _THRESHOLD:
        if depth == 0:
            partial_sort(a, first, last, last, comp)
            return
        depth -= 1
        cut = _unguarded_partition_pivot(a, first, last, comp)
        _introsort_loop(a, cut, last, depth, comp)
        last = cut


def std_sort(a, first, last, comp):
    """std::sort (introsort, then a final insertion sort)."""
    if first != last:
        _introsort_loop(a, first, last, _lg(last - first) * 2, comp)
        _final_insertion_sort(a, first, last, comp)


def nth_element(a, first, nth, last, comp):
    """std::nth_element (introselect)."""
    if first == last or nth == last:
        return
    depth = _lg(last - first) * 2
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, comp)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _unguarded_partition_pivot(a, first, last, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last, comp)


# ----------------------------------------------------------------------------------------
# the kernels' orders, for one slice given as a list of Python values
# ----------------------------------------------------------------------------------------
def _pairs(values):
    return [(v, i) for i, v in enumerate(values)]


def sort_order(values, descending):
    """torch's sort(stable=False) of one slice: the indices in output order."""
    q = _pairs(values)
    std_sort(q, 0, len(q), desc if descending else asc)
    return [i for _, i in q]


def topk_order(values, k, largest, sorted):
    """torch's topk of one slice (k >= 1): the k indices in output order."""
    q = _pairs(values)
    n = len(q)
    comp = desc if largest else asc
    if k * 64 <= n:
        partial_sort(q, 0, k, n, comp)
    else:
        nth_element(q, 0, k - 1, n, comp)
        if sorted:
            std_sort(q, 0, k - 1, comp)
    return [i for _, i in q[:k]]


def kth_index(values, k):
    """torch's kthvalue of one slice (1 <= k <= n): the index its quickselect returns."""
    vals = list(values)
    idx = list(range(len(vals)))
    k -= 1

    def gt(x, y):
        return (_isnan(x) and not _isnan(y)) or x > y

    def swap(i, j):
        vals[i], vals[j] = vals[j], vals[i]
        idx[i], idx[j] = idx[j], idx[i]

    lo, hi = 0, len(vals) - 1
    while True:
        if hi <= lo:
            break
        if hi == lo + 1:
            if gt(vals[lo], vals[hi]):
                swap(lo, hi)
            break
        p = lo + (hi - lo) // 2
        swap(p, lo + 1)
        if gt(vals[lo + 1], vals[hi]):
            swap(lo + 1, hi)
        if gt(vals[lo], vals[hi]):
            swap(lo, hi)
        if gt(vals[lo + 1], vals[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, vals[lo]
        while True:
            i += 1
            while gt(piv, vals[i]):
                i += 1
            j -= 1
            while gt(vals[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return idx[k]


def _lex_less(x, y):
    for a, b in zip(x[0], y[0]):
        if a < b:
            return True
        if a > b:
            return False
    return False


def unique_dim_order(rows):
    """torch's order of the slices (rows: a list of lists) in unique(dim=...)."""
    el = [(tuple(r), i) for i, r in enumerate(rows)]
    std_sort(el, 0, len(el), _lex_less)
    return [i for _, i in el]


def mode_of(values):
    """torch's mode of one non-empty slice: (value, index)."""
    el = _pairs(values)
    std_sort(el, 0, len(el), plain_less)
    mode, modei, run, best = el[0][0], el[0][1], 0, 0
    n = len(el)
    for i in range(n):
        run += 1
        if i == n - 1 or el[i][0] != el[i + 1][0]:
            if run > best:
                mode, modei, best = el[i][0], el[i][1], run
            run = 0
    return mode, modei
