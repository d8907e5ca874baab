r"""Sampled-candidate evaluation (the OGB protocol): each answer ranked
against :math:`n` candidates drawn uniformly without replacement from its
filtered candidates, instead of against all of them.

The draw of query :math:`q` is the :math:`n` filtered candidates :math:`e`
with the smallest keys :math:`\mathrm{hash}(\mathrm{seed}, q, e)`, a
counter-based hash (SplitMix64): it depends on the seed, the query's index
among all evaluated queries and the entity only, so every model ranked on the
same triples with the same seed meets the same candidates, whatever the
batching or the number of processes. A query with at most :math:`n` filtered
candidates keeps all of them (its rank is its full filtered rank).

Figures from sampled candidates are not comparable with full-ranking ones:
:meth:`~pyg_degreembed.Ranks.metrics` names the protocol and the
command line prints it.
"""
from typing import Tuple

import torch
from torch import Tensor

#: SplitMix64's constants as signed 64-bit integers.
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)
#: Hash keys computed at once (rows x entities), 128 MiB of int64.
_CHUNK = 1 << 24


def _shift(x: Tensor, bits: int) -> Tensor:
    # Logical right shift of int64 (torch's >> is arithmetic).
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x: Tensor) -> Tensor:
    r"""SplitMix64's finaliser of :obj:`x + golden ratio`, elementwise on
    int64 (wrapping arithmetic): a well-mixed 64-bit hash."""
    z = x + _GOLDEN
    z = (z ^ _shift(z, 30)) * _MIX1
    z = (z ^ _shift(z, 27)) * _MIX2
    return z ^ _shift(z, 31)


def draw_candidates(candidate: Tensor, query: Tensor, num_candidates: int,
                    seed: int = 0) -> Tuple[Tensor, Tensor]:
    r"""The sampled candidates of each query.

    Args:
        candidate (torch.Tensor): The filtered candidates of each query, a
            boolean mask :obj:`[B, N]`.
        query (torch.Tensor): Each query's index among all evaluated
            queries (what keys its draw), shape :obj:`[B]`.
        num_candidates (int): :math:`n`, candidates per query.
        seed (int, optional): The draw's seed. (default: :obj:`0`)

    :rtype: (:obj:`ids`, :obj:`drawn`): entity ids :obj:`[B, min(n, N)]`
        and whether each is a drawn candidate (a query with fewer than
        :math:`n` filtered candidates has all of them, the rest of its row
        is padding).
    """
    if num_candidates < 1:
        raise ValueError(f"'num_candidates' must be at least 1, got "
                         f'{num_candidates}')
    B, N = candidate.shape
    k = min(num_candidates, N)
    entity = torch.arange(N, device=candidate.device)
    row_key = splitmix64(query.to(candidate.device).long() ^
                         int(splitmix64(torch.tensor(seed))))
    ids = candidate.new_empty((B, k), dtype=torch.long)
    step = max(1, _CHUNK // max(N, 1))
    for start in range(0, B, step):
        rows = slice(start, start + step)
        key = splitmix64(row_key[rows].view(-1, 1) + entity)
        key.masked_fill_(~candidate[rows], torch.iinfo(torch.long).max)
        ids[rows] = key.topk(k, dim=1, largest=False, sorted=False).indices
    return ids, candidate.gather(1, ids)


__all__ = ['draw_candidates', 'splitmix64']
