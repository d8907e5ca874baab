r"""Index helpers: ragged (variable-length) segments, and lookups in sorted
keys."""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.utils import cumsum


def ragged_arange(start: Tensor, count: Tensor,
                  total: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    r"""Concatenates the ranges :obj:`start[i], start[i] + 1, ...,
    start[i] + count[i] - 1` of all segments :math:`i`, without a Python
    loop:

    .. math::
        \mathrm{value}_m = \mathrm{start}_{s(m)} + m -
        \sum_{i < s(m)} \mathrm{count}_i

    where :math:`s(m)` is the segment of element :math:`m`.  Used to expand
    entries along their CSR rows (edges of a node, answers of a query, ...).

    Args:
        start (torch.Tensor): First value of each segment, shape :obj:`[S]`.
        count (torch.Tensor): Length of each segment, shape :obj:`[S]`.
        total (int, optional): :obj:`count.sum()` if known (saves a device
            synchronisation). (default: :obj:`None`)

    :rtype: (:class:`torch.Tensor`, :class:`torch.Tensor`): the segment of
        every element and its value, each of shape :obj:`[total]`.
    """
    if total is None:
        total = int(count.sum())
    device = count.device
    segment = torch.repeat_interleave(
        torch.arange(count.numel(), device=device), count, output_size=total)
    offset = (start - cumsum(count)[:-1]).index_select(0, segment)
    return segment, offset + torch.arange(total, device=device)


def find_sorted(keys: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
    r"""Where each of :obj:`values` stands in the sorted :obj:`keys`
    (clamped to a valid position) and whether it is there.

    :rtype: (:class:`torch.Tensor`, :class:`torch.Tensor`): positions and
        a boolean mask, each of the shape of :obj:`values`
    """
    at = torch.searchsorted(keys, values).clamp(max=max(keys.numel() - 1, 0))
    if keys.numel() == 0:
        return at, torch.zeros_like(values, dtype=torch.bool)
    return at, keys[at] == values


def outside_ranges(value: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    r"""Whether each :obj:`value[i]` lies outside every range
    :obj:`[lo[i, s], hi[i, s])` (e.g. an edge id and the id ranges of the
    edges its query leaves out), shape of :obj:`value`."""
    value = value.unsqueeze(-1)
    return ~((lo <= value) & (value < hi)).any(dim=-1)
