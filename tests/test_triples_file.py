import pytest
import torch

from pyg_degreembed import KGFormatError
from pyg_degreembed.data.io import load_triples_file
from pyg_degreembed.data.kg import SPLITS, split_triples


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def all_named(data):
    out = set()
    for split in SPLITS:
        for h, r, t in split_triples(data, split).t().tolist():
            out.add((data.entity_names[h], data.relation_names[r],
                     data.entity_names[t]))
    return out


def test_tsv_and_csv_with_quotes(tmp_path):
    rows = [('a', 'likes', 'b'), ('b', 'likes', 'c'), ('c', 'hates', 'a'),
            ('a, jr.', 'likes', 'c')]
    tsv = write(tmp_path, 'kg.tsv',
                ''.join('\t'.join(r) + '\n' for r in rows).encode())
    csv = write(tmp_path, 'kg.csv', b'a,likes,b\nb,likes,c\nc,hates,a\n'
                b'"a, jr.",likes,c\n')
    for path in (tsv, csv):
        data = load_triples_file(path, fractions=(0.25, 0.25, 0.25, 0.25))
        assert all_named(data) == set(rows)
        assert [data[f'{s}_edge_type'].numel() for s in SPLITS] == [1] * 4
    assert load_triples_file(tsv).entity_names == ['a', 'b', 'c', 'a, jr.']


def test_split_is_seeded(tmp_path):
    path = write(tmp_path, 'kg.tsv', ''.join(
        f'e{i}\tr{i % 3}\te{i + 1}\n' for i in range(50)).encode())
    a = load_triples_file(path, seed=1)
    b = load_triples_file(path, seed=1)
    c = load_triples_file(path, seed=2)
    assert torch.equal(a.test_edge_index, b.test_edge_index)
    assert not torch.equal(a.test_edge_index, c.test_edge_index)
    assert [a[f'{s}_edge_type'].numel() for s in SPLITS] == [30, 10, 5, 5]


@pytest.mark.parametrize('content,line,message', [
    (b'a\tr\tb\na\tr\n', 2, 'expected 3 fields'),
    (b'a\tr\tb\na\t\tc\n', 2, 'empty field'),
    (b'a\tr\tb\nb\tinv_r\tc\n', 2, "starts with 'inv_'"),
    (b'a\tr\tb\nc\tr\td\na\tr\tb\n', 3, 'duplicate triple (first on line 1)'),
    (b'a\tr\tb\n\nb\tr\tc\n', 2, 'blank line'),
    (b'a\tr\tb\n \t\nb\tr\tc\n\n', 2, 'blank line'),
    (b'a\tr\t\xe9\n', 1, 'not valid UTF-8'),
    (b'', 0, 'no triples'),
])
def test_bad_triples_file(tmp_path, content, line, message):
    path = write(tmp_path, 'kg.tsv', content)
    with pytest.raises(KGFormatError) as info:
        load_triples_file(path)
    assert info.value.line == line and message in str(info.value)
    assert str(info.value).startswith(path)


def test_bad_fractions(tmp_path):
    path = write(tmp_path, 'kg.tsv', b'a\tr\tb\n')
    with pytest.raises(ValueError, match='summing to 1'):
        load_triples_file(path, fractions=(0.5, 0.5, 0.5, 0))
    with pytest.raises(KGFormatError, match='no training triple'):
        load_triples_file(path)
