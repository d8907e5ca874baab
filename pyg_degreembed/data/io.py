r"""Reading knowledge graphs in the Neural-LP folder format.

Two formats are read: the Neural-LP folder (:func:`load_neural_lp`) and a
single file of triples split at random (:func:`load_triples_file`).

A folder holds :obj:`entities.txt` and :obj:`relations.txt` (one name per
line; the line order gives the id) and :obj:`facts.txt`, :obj:`train.txt`,
:obj:`valid.txt`, :obj:`test.txt` (one triple per line,
:obj:`head<TAB>relation<TAB>tail`).  :obj:`facts.txt` may be absent: then the
graph is the training triples alone, and every training triple is both an
edge and a training query (its own edge is left out while it is answered).
:obj:`entities.txt` and :obj:`relations.txt` may be absent together (the
three-file layout of WN18RR, FB15k-237 and the GraIL splits): then names get
ids in order of first appearance in facts, train, valid, test.

What is accepted, and what is rejected with a :class:`KGFormatError` naming
the file and line:

* UTF-8 text; a leading byte-order mark and Windows line ends (CRLF) are
  accepted and ignored.  Other bytes that are not UTF-8 are rejected.
* A missing final newline is accepted, and so are empty or whitespace-only
  lines at the end of a file (editors and most tools leave them, and PyG's
  and PyKEEN's readers accept them).  A blank line before the last triple is
  rejected (it usually means a truncated or hand-edited file).
* A triple line must have exactly three tab-separated, non-empty fields whose
  names occur in :obj:`entities.txt`/:obj:`relations.txt` (when given).
* Names must be unique, must not contain tabs, and relation names must not
  start with :obj:`inv_` (reserved for inverse relations).
* A triple may occur only once, in one split.
"""
import csv
import os
import os.path as osp
from array import array
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from pyg_degreembed.data.kg import SPLITS, kg_data, triple_keys

#: First lines of a triples file that are read as a header and skipped.
HEADERS = {('head', 'relation', 'tail'), ('head', 'rel', 'tail'),
           ('subject', 'predicate', 'object'), ('source', 'relation',
                                                'target'),
           ('h', 'r', 't'), ('s', 'p', 'o'), ('from', 'relation', 'to')}


class KGFormatError(ValueError):
    r"""A knowledge-graph file is malformed.  The message names the file and
    (where there is one) the line."""
    def __init__(self, path: str, line: int, problem: str):
        self.path, self.line, self.problem = path, line, problem
        where = f'{path}:{line}' if line > 0 else path
        super().__init__(f'{where}: {problem}')


#: The longest line read (bytes): a longer one is an error, not a read of
#: the whole file into memory.
MAX_LINE_BYTES = 1 << 20


def read_lines(path: str) -> Iterator[Tuple[int, str]]:
    r"""Streams a UTF-8 text file as :obj:`(line number, text)` without line
    ends, checking each line as it is read (memory does not grow with the
    file): blank lines at the end are dropped, other blank lines, bytes
    that are not UTF-8, a byte-order mark after the start of the file and
    lines over :obj:`MAX_LINE_BYTES` are rejected with the file and line
    number."""
    if not osp.isfile(path):
        raise KGFormatError(path, 0, 'file not found')
    try:
        f = open(path, 'rb')
    except OSError as e:
        raise KGFormatError(path, 0, f'cannot read the file '
                            f'({e.strerror or e})') from None
    with f:
        blank = 0  # the first of the blank lines just read
        i = 0
        while True:
            try:
                line = f.readline(MAX_LINE_BYTES + 1)
            except OSError as e:
                raise KGFormatError(path, i + 1, f'cannot read the file '
                                    f'({e.strerror or e})') from None
            if not line:
                return  # blank lines at the end are accepted
            i += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b'\n'):
                raise KGFormatError(path, i, f'line longer than '
                                    f'{MAX_LINE_BYTES} bytes (not a triples '
                                    'file?)')
            if i == 1 and line.startswith(b'\xef\xbb\xbf'):
                line = line[3:]
            line = line.rstrip(b'\n')
            if line.endswith(b'\r'):
                line = line[:-1]
            try:
                text = line.decode('utf-8')
            except UnicodeDecodeError as e:
                raise KGFormatError(path, i, f'not valid UTF-8 ({e.reason} '
                                    f'at byte {e.start} of the line)') \
                    from None
            if not text.strip():
                blank = blank or i
                continue
            if blank:
                raise KGFormatError(path, blank, 'blank line')
            if '\ufeff' in text:
                raise KGFormatError(path, i, 'byte-order mark (U+FEFF) '
                                    'inside the file: files joined with '
                                    'their marks?')
            yield i, text


def read_names(path: str, kind: str) -> List[str]:
    r"""Reads :obj:`entities.txt` or :obj:`relations.txt`."""
    names = []
    seen: Dict[str, int] = {}
    for i, name in read_lines(path):
        if '\t' in name:
            raise KGFormatError(path, i, f'{kind} name contains a tab')
        check_name(path, i, name, kind)
        if name in seen:
            raise KGFormatError(
                path, i, f'duplicate {kind} name {name!r} (first on line '
                f'{seen[name]})')
        seen[name] = i
        names.append(name)
    if not names:
        raise KGFormatError(path, 0, f'empty file: no {kind} names')
    return names


def check_name(path: str, line: int, name: str, kind: str):
    r"""Rejects an entity or relation name with leading or trailing spaces,
    and a relation name starting with :obj:`inv_`."""
    if name != name.strip():
        raise KGFormatError(path, line, f'{kind} name {name!r} has leading '
                            'or trailing spaces')
    if kind == 'relation' and name.startswith('inv_'):
        raise KGFormatError(
            path, line, f"relation name {name!r} starts with 'inv_', which "
            'is reserved for inverse relations')


def read_triples(path: str, entity_ids: Dict[str, int],
                 relation_ids: Dict[str, int],
                 new_names: bool = False) -> Tuple[Tensor, Tensor]:
    r"""Reads a triple file into a :obj:`[3, n]` tensor of rows (head,
    relation, tail), and the line number of each triple.  With
    :obj:`new_names`, a name not in :obj:`entity_ids`/:obj:`relation_ids`
    is added to it with the next id, else it is an error."""
    rows, line_numbers = array('q'), array('q')
    for i, line in read_lines(path):
        fields = line.split('\t')
        if len(fields) != 3:
            raise KGFormatError(
                path, i, f'expected 3 tab-separated fields (head, relation, '
                f'tail), got {len(fields)}')
        head, rel, tail = fields
        for name, table, kind in ((head, entity_ids, 'entity'),
                                  (rel, relation_ids, 'relation'),
                                  (tail, entity_ids, 'entity')):
            if name not in table and new_names:
                if not name:
                    raise KGFormatError(path, i, f'empty {kind} field')
                check_name(path, i, name, kind)
                table[name] = len(table)
            elif name not in table:
                raise KGFormatError(
                    path, i, f'unknown {kind} {name!r} (not in '
                    f"{'entities' if kind == 'entity' else 'relations'}.txt)")
        rows.extend((entity_ids[head], relation_ids[rel], entity_ids[tail]))
        line_numbers.append(i)
    return _long(rows).view(-1, 3).t().contiguous(), _long(line_numbers)


def _long(values: array) -> Tensor:
    # An array('q') as a tensor (sharing its memory).
    return torch.frombuffer(values, dtype=torch.long) if values else \
        torch.empty(0, dtype=torch.long)


def first_duplicate(triples: Tensor) -> Optional[Tuple[int, int]]:
    r"""The first column :math:`i` of :obj:`triples` (shape :obj:`[3, n]`)
    that repeats an earlier one, and the first column :math:`j < i` it
    repeats (:obj:`None` where all are distinct); sorted keys, not a Python
    set (a 10M-triple KG's set took gigabytes)."""
    if triples.size(1) < 2:
        return None
    key = triple_keys(triples)
    order = torch.argsort(key, stable=True)
    ordered = key[order]
    repeats = order[1:][ordered[1:] == ordered[:-1]]
    if not repeats.numel():
        return None
    i = int(repeats.min())
    return i, int((key == key[i]).nonzero()[0])


def _field_splitter(path: str, first_line: str, delimiter: Optional[str]):
    # How the lines of a triples file split into fields, from its name or
    # its first line; and the separator's name for messages.
    if delimiter is None:
        if path.endswith('.tsv'):
            delimiter = '\t'
        elif path.endswith('.csv'):
            delimiter = ','
        else:
            delimiter = '\t' if '\t' in first_line else \
                ',' if ',' in first_line else ' '
    separator = {'\t': 'tabs', ',': 'commas', ' ': 'whitespace'}.get(
        delimiter, repr(delimiter))

    def split(path: str, i: int, line: str) -> List[str]:
        if delimiter == ' ':
            return line.split()
        if delimiter != ',':
            return line.split(delimiter)
        try:  # CSV quoting; a space after a comma is not part of a field
            return next(csv.reader([line], delimiter=delimiter,
                                   skipinitialspace=True))
        except csv.Error as e:
            raise KGFormatError(path, i, f'not a CSV line ({e})') from None

    return split, separator


def load_neural_lp(folder: str) -> Data:
    r"""Loads a knowledge graph in the Neural-LP folder format into a
    :class:`~torch_geometric.data.Data` object (layout in
    :mod:`pyg_degreembed.data.kg`).

    Args:
        folder (str): The folder with :obj:`train.txt`, :obj:`valid.txt`,
            :obj:`test.txt`, and optionally :obj:`facts.txt`, (both or
            neither) :obj:`entities.txt` and :obj:`relations.txt`, and
            :obj:`entity_types.txt` (:obj:`entity<TAB>type` lines, every
            entity typed): a typed KG, whose answers are ranked among the
            entities of their type
            (:func:`~pyg_degreembed.data.kg.answer_types`;
            each relation must join one source type to one destination
            type).
    """
    if not osp.isdir(folder):
        raise KGFormatError(folder, 0, 'not a folder')
    name_files = [osp.join(folder, f'{kind}.txt')
                  for kind in ('entities', 'relations')]
    present = [osp.exists(path) for path in name_files]
    if present[0] != present[1]:
        missing = name_files[present.index(False)]
        raise KGFormatError(missing, 0, 'file not found (entities.txt and '
                            'relations.txt go together: give both, or '
                            'neither to name entities and relations in '
                            'order of appearance)')
    new_names = not present[0]
    entity_ids: Dict[str, int] = {}
    relation_ids: Dict[str, int] = {}
    if not new_names:
        for path, kind, table in zip(name_files, ('entity', 'relation'),
                                     (entity_ids, relation_ids)):
            table.update((name, i)
                         for i, name in enumerate(read_names(path, kind)))

    splits, paths, lines = {}, [], []
    for split in SPLITS:
        path = osp.join(folder, f'{split}.txt')
        if split == 'facts' and not os.path.exists(path):
            continue
        splits[split], line_numbers = read_triples(
            path, entity_ids, relation_ids, new_names)
        paths += [path] * line_numbers.numel()
        lines.append(line_numbers)
    duplicate = first_duplicate(torch.cat(list(splits.values()), dim=1))
    if duplicate is not None:
        line = torch.cat(lines)
        i, j = duplicate
        raise KGFormatError(paths[i], int(line[i]), f'duplicate triple '
                            f'(first in {paths[j]}:{int(line[j])})')
    if splits['train'].size(1) == 0:
        raise KGFormatError(osp.join(folder, 'train.txt'), 0,
                            'empty file: no training triples')
    data = kg_data(len(entity_ids), len(relation_ids), splits,
                   list(entity_ids), list(relation_ids))
    types = osp.join(folder, 'entity_types.txt')
    if osp.exists(types):
        read_entity_types(types, data, entity_ids)
    return data


def read_entity_types(path: str, data: Data, entity_ids: Dict[str, int]):
    r"""Reads :obj:`entity<TAB>type` lines into :obj:`data.node_type`,
    :obj:`data.node_type_names` and :obj:`data.relation_types` (see
    :func:`~pyg_degreembed.data.kg.answer_types`)."""
    node_type = torch.full((len(entity_ids), ), -1, dtype=torch.long)
    type_ids: Dict[str, int] = {}
    for i, line in read_lines(path):
        fields = line.split('\t')
        if len(fields) != 2 or not all(fields):
            raise KGFormatError(path, i, 'expected 2 tab-separated fields '
                                '(entity, type)')
        if fields[0] not in entity_ids:
            raise KGFormatError(path, i, f'unknown entity {fields[0]!r}')
        if node_type[entity_ids[fields[0]]] >= 0:
            raise KGFormatError(path, i, f'entity {fields[0]!r} typed twice')
        node_type[entity_ids[fields[0]]] = type_ids.setdefault(
            fields[1], len(type_ids))
    untyped = (node_type < 0).nonzero().view(-1)
    if untyped.numel():
        raise KGFormatError(path, 0, f'{untyped.numel()} entities without a '
                            f'type (first: '
                            f'{data.entity_names[int(untyped[0])]!r})')
    relation_types = torch.full((data.num_relations, 2), -1,
                                dtype=torch.long)
    names = list(type_ids)
    for split in SPLITS:
        (h, t), r = data[f'{split}_edge_index'], data[f'{split}_edge_type']
        for end, ends in ((0, h), (1, t)):
            for rel, kind in torch.unique(torch.stack([r, node_type[ends]]),
                                          dim=1).t().tolist():
                if int(relation_types[rel, end]) not in (-1, kind):
                    raise KGFormatError(
                        path, 0, f'relation {data.relation_names[rel]!r} '
                        f"joins {'sources' if end == 0 else 'destinations'} "
                        f'of the types '
                        f'{names[int(relation_types[rel, end])]!r} and '
                        f'{names[kind]!r}: a typed KG needs one source and '
                        'one destination type per relation')
                relation_types[rel, end] = kind
    data.node_type = node_type
    data.node_type_names = names
    data.relation_types = relation_types


def load_triples_file(path: str,
                      fractions: Sequence[float] = (0.6, 0.2, 0.1, 0.1),
                      seed: int = 0, delimiter: Optional[str] = None) -> Data:
    r"""Loads a single file of triples, one :obj:`head, relation, tail` a
    line, and splits it at random into facts, train, valid and test.

    Entities and relations get ids in order of first appearance.  The same
    checks as for :func:`load_neural_lp` apply (encoding, blank lines, field
    count, duplicate triples, names with leading or trailing spaces,
    :obj:`inv_` relation names), each naming the
    file and line.  A first line that is a header (:obj:`head relation
    tail`, :obj:`subject predicate object`, :obj:`source relation target`,
    :obj:`h r t`, :obj:`s p o`, any case) is skipped.

    Args:
        path (str): A :obj:`.tsv` (tab-separated) or :obj:`.csv` file
            (comma-separated, with CSV quoting); other names are read as
            tab-separated if their first line has a tab, as CSV if it has a
            comma, else as separated by whitespace (as PyG's
            :class:`~torch_geometric.datasets.WordNet18RR` reads them).
        fractions (Sequence[float], optional): Shares of facts, train, valid
            and test, summing to 1. (default: :obj:`(0.6, 0.2, 0.1, 0.1)`,
            the paper's 6:2:1:1)
        seed (int, optional): Seed of the random split. (default: :obj:`0`)
        delimiter (str, optional): Override the field delimiter.
    """
    if len(fractions) != 4 or any(f < 0 for f in fractions) or \
            abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"'fractions' must be four shares (facts, train, "
                         f"valid, test) summing to 1, got {list(fractions)}")
    entity_ids: Dict[str, int] = {}
    relation_ids: Dict[str, int] = {}
    values, lines = array('q'), array('q')
    split = None
    for i, line in read_lines(path):
        if split is None:  # the first line decides the separator
            split, separator = _field_splitter(path, line, delimiter)
            fields = split(path, i, line)
            if tuple(f.strip().lower() for f in fields) in HEADERS:
                continue
        fields = split(path, i, line)
        if len(fields) != 3:
            raise KGFormatError(
                path, i, f'expected 3 fields separated by {separator} '
                f'(head, relation, tail), got {len(fields)}')
        if not all(fields):
            raise KGFormatError(path, i, 'empty field')
        for name, kind in zip(fields, ('entity', 'relation', 'entity')):
            check_name(path, i, name, kind)
        head, rel, tail = fields
        values.extend((entity_ids.setdefault(head, len(entity_ids)),
                       relation_ids.setdefault(rel, len(relation_ids)),
                       entity_ids.setdefault(tail, len(entity_ids))))
        lines.append(i)
    if split is None:
        raise KGFormatError(path, 0, 'empty file: no triples')
    if not values:
        raise KGFormatError(path, 0, 'no triples (only a header)')

    triples = _long(values).view(-1, 3).t()
    duplicate = first_duplicate(triples)
    if duplicate is not None:
        i, j = duplicate
        raise KGFormatError(path, lines[i], f'duplicate triple (first on '
                            f'line {lines[j]})')
    perm = torch.randperm(triples.size(1),
                          generator=torch.Generator().manual_seed(seed))
    bounds = [round(sum(fractions[:i + 1]) * triples.size(1))
              for i in range(4)]
    bounds = [0] + bounds[:3] + [triples.size(1)]
    splits = {
        name: triples[:, perm[bounds[i]:bounds[i + 1]]]
        for i, name in enumerate(SPLITS)
    }
    if splits['train'].size(1) == 0:
        raise KGFormatError(path, 0, f'{triples.size(1)} triples leave no '
                            'training triple with these fractions')
    return kg_data(len(entity_ids), len(relation_ids), splits,
                   list(entity_ids), list(relation_ids))
