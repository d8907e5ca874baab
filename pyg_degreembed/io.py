r"""Reading knowledge graphs in the Neural-LP folder format.

A folder holds :obj:`entities.txt` and :obj:`relations.txt` (one name per
line; the line order gives the id) and :obj:`facts.txt`, :obj:`train.txt`,
:obj:`valid.txt`, :obj:`test.txt` (one triple per line,
:obj:`head<TAB>relation<TAB>tail`).  :obj:`facts.txt` may be absent (then the
graph is the training triples alone).

What is accepted, and what is rejected with a :class:`KGFormatError` naming
the file and line:

* UTF-8 text; a leading byte-order mark and Windows line ends (CRLF) are
  accepted and ignored.  Other bytes that are not UTF-8 are rejected.
* A missing final newline is accepted.  Blank lines are rejected (they usually
  mean a truncated or hand-edited file).
* A triple line must have exactly three tab-separated, non-empty fields whose
  names occur in :obj:`entities.txt`/:obj:`relations.txt`.
* Names must be unique, must not contain tabs, and relation names must not
  start with :obj:`inv_` (reserved for inverse relations).
* A triple may occur only once, in one split.
"""
import os
import os.path as osp
from typing import Dict, List, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from .kg import SPLITS, kg_data


class KGFormatError(ValueError):
    r"""A knowledge-graph file is malformed.  The message names the file and
    (where there is one) the line."""
    def __init__(self, path: str, line: int, problem: str):
        self.path, self.line, self.problem = path, line, problem
        where = f'{path}:{line}' if line > 0 else path
        super().__init__(f'{where}: {problem}')


def read_lines(path: str) -> List[str]:
    r"""Reads a UTF-8 text file into lines, without line ends; rejects blank
    lines and undecodable bytes with the file and line number."""
    if not osp.isfile(path):
        raise KGFormatError(path, 0, 'file not found')
    with open(path, 'rb') as f:
        raw = f.read()
    if raw.startswith(b'\xef\xbb\xbf'):
        raw = raw[3:]
    lines = raw.split(b'\n')
    if lines and lines[-1] == b'':
        lines.pop()  # the final newline
    out = []
    for i, line in enumerate(lines, start=1):
        if line.endswith(b'\r'):
            line = line[:-1]
        try:
            text = line.decode('utf-8')
        except UnicodeDecodeError as e:
            raise KGFormatError(path, i, f'not valid UTF-8 ({e.reason} at '
                                f'byte {e.start} of the line)') from None
        if not text.strip():
            raise KGFormatError(path, i, 'blank line')
        out.append(text)
    return out


def read_names(path: str, kind: str) -> List[str]:
    r"""Reads :obj:`entities.txt` or :obj:`relations.txt`."""
    names = read_lines(path)
    if not names:
        raise KGFormatError(path, 0, f'empty file: no {kind} names')
    seen: Dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if '\t' in name:
            raise KGFormatError(path, i, f'{kind} name contains a tab')
        if name != name.strip():
            raise KGFormatError(path, i, f'{kind} name {name!r} has leading '
                                'or trailing spaces')
        if kind == 'relation' and name.startswith('inv_'):
            raise KGFormatError(
                path, i, f"relation name {name!r} starts with 'inv_', which "
                'is reserved for inverse relations')
        if name in seen:
            raise KGFormatError(
                path, i, f'duplicate {kind} name {name!r} (first on line '
                f'{seen[name]})')
        seen[name] = i
    return names


def read_triples(path: str, entity_ids: Dict[str, int],
                 relation_ids: Dict[str, int]) -> Tuple[Tensor, List[int]]:
    r"""Reads a triple file into a :obj:`[3, n]` tensor of rows (head,
    relation, tail), and the line number of each triple."""
    rows, line_numbers = [], []
    for i, line in enumerate(read_lines(path), start=1):
        fields = line.split('\t')
        if len(fields) != 3:
            raise KGFormatError(
                path, i, f'expected 3 tab-separated fields (head, relation, '
                f'tail), got {len(fields)}')
        head, rel, tail = fields
        for name, table, kind in ((head, entity_ids, 'entity'),
                                  (rel, relation_ids, 'relation'),
                                  (tail, entity_ids, 'entity')):
            if name not in table:
                raise KGFormatError(
                    path, i, f'unknown {kind} {name!r} (not in '
                    f"{'entities' if kind == 'entity' else 'relations'}.txt)")
        rows.append((entity_ids[head], relation_ids[rel], entity_ids[tail]))
        line_numbers.append(i)
    triples = torch.tensor(rows, dtype=torch.long).view(-1, 3).t()
    return triples.contiguous(), line_numbers


def load_neural_lp(folder: str) -> Data:
    r"""Loads a knowledge graph in the Neural-LP folder format into a
    :class:`~torch_geometric.data.Data` object (layout in
    :mod:`pyg_degreembed.kg`).

    Args:
        folder (str): The folder with :obj:`entities.txt`,
            :obj:`relations.txt`, :obj:`facts.txt` (optional),
            :obj:`train.txt`, :obj:`valid.txt` and :obj:`test.txt`.
    """
    if not osp.isdir(folder):
        raise KGFormatError(folder, 0, 'not a folder')
    entities = read_names(osp.join(folder, 'entities.txt'), 'entity')
    relations = read_names(osp.join(folder, 'relations.txt'), 'relation')
    entity_ids = {name: i for i, name in enumerate(entities)}
    relation_ids = {name: i for i, name in enumerate(relations)}

    splits = {}
    first_seen: Dict[Tuple[int, int, int], Tuple[str, int]] = {}
    for split in SPLITS:
        path = osp.join(folder, f'{split}.txt')
        if split == 'facts' and not os.path.exists(path):
            continue
        triples, line_numbers = read_triples(path, entity_ids, relation_ids)
        for triple, line in zip(triples.t().tolist(), line_numbers):
            key = tuple(triple)
            if key in first_seen:
                other, other_line = first_seen[key]
                raise KGFormatError(
                    path, line, f'duplicate triple (first in '
                    f'{other}:{other_line})')
            first_seen[key] = (path, line)
        splits[split] = triples
    if splits['train'].size(1) == 0:
        raise KGFormatError(osp.join(folder, 'train.txt'), 0,
                            'empty file: no training triples')
    return kg_data(len(entities), len(relations), splits, entities, relations)
