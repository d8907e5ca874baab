import os.path as osp

import pytest
import torch

from pyg_degreembed import KGFormatError, bundled_path, load_neural_lp


def write_kg(folder, files):
    base = {
        'entities.txt': b'a\nb\nc\n',
        'relations.txt': b'r\ns\n',
        'facts.txt': b'a\tr\tb\n',
        'train.txt': b'b\ts\tc\n',
        'valid.txt': b'a\ts\tc\n',
        'test.txt': b'c\tr\ta\n',
    }
    base.update(files)
    for name, content in base.items():
        with open(osp.join(folder, name), 'wb') as f:
            f.write(content)
    return str(folder)


def test_family_counts_and_layout():
    data = load_neural_lp(bundled_path('family'))
    assert data.num_nodes == 3007 and data.num_relations == 12
    sizes = [data[f'{s}_edge_type'].numel()
             for s in ('facts', 'train', 'valid', 'test')]
    assert sizes == [17615, 5868, 2038, 2835]
    # Graph = facts + train with inverses; valid/test are never edges.
    E = 17615 + 5868
    assert data.edge_index.size(1) == 2 * E
    assert torch.equal(data.edge_index[:, E:], data.edge_index[[1, 0], :E])
    assert torch.equal(data.edge_type[E:], data.edge_type[:E] + 12)
    graph_triples = set(zip(data.edge_index[0].tolist(),
                            data.edge_type.tolist(),
                            data.edge_index[1].tolist()))
    for split in ('valid', 'test'):
        triples = set(zip(data[f'{split}_edge_index'][0].tolist(),
                          data[f'{split}_edge_type'].tolist(),
                          data[f'{split}_edge_index'][1].tolist()))
        assert len(triples) == data[f'{split}_edge_type'].numel()
        assert not graph_triples & triples


def test_names_and_ids(tmp_path):
    data = load_neural_lp(write_kg(tmp_path, {}))
    assert data.entity_names == ['a', 'b', 'c']
    assert data.relation_names == ['r', 's']
    assert data.train_edge_index.tolist() == [[1], [2]]
    assert data.train_edge_type.tolist() == [1]


def test_crlf_bom_and_missing_final_newline_are_accepted(tmp_path):
    folder = write_kg(tmp_path, {
        'entities.txt': b'\xef\xbb\xbfa\r\nb\r\nc',
        'train.txt': b'b\ts\tc\r\n',
    })
    data = load_neural_lp(folder)
    assert data.entity_names == ['a', 'b', 'c']
    assert data.train_edge_index.tolist() == [[1], [2]]


def test_trailing_blank_lines_are_accepted(tmp_path):
    folder = write_kg(tmp_path, {'train.txt': b'b\ts\tc\n\n',
                                 'test.txt': b'c\tr\ta\n \r\n\t\n\n',
                                 'entities.txt': b'a\nb\nc\n\n'})
    data = load_neural_lp(folder)
    assert data.entity_names == ['a', 'b', 'c']
    assert data.train_edge_type.numel() == 1
    assert data.test_edge_type.numel() == 1
    from pyg_degreembed.data.io import load_triples_file
    path = tmp_path / 'kg.tsv'
    path.write_bytes(''.join(f'e{i}\tr\te{i + 1}\n' for i in range(20))
                     .encode() + b'\n  \n')
    assert load_triples_file(str(path)).num_nodes == 21


def test_facts_file_is_optional(tmp_path):
    folder = write_kg(tmp_path, {})
    import os
    os.remove(osp.join(folder, 'facts.txt'))
    data = load_neural_lp(folder)
    assert data.facts_edge_type.numel() == 0
    assert data.edge_index.size(1) == 2


@pytest.mark.parametrize('file,content,line,message', [
    ('train.txt', b'b\ts\tc\nb\ts\n', 2, 'expected 3 tab-separated fields'),
    ('train.txt', b'b s c\n', 1, 'got 1'),
    ('test.txt', b'c\tr\ta\n\nb\tr\ta\n', 2, 'blank line'),
    ('valid.txt', b'a\ts\tzz\n', 1, "unknown entity 'zz'"),
    ('facts.txt', b'a\tq\tb\n', 1, "unknown relation 'q'"),
    ('train.txt', b'b\ts\tc\nb\ts\tc\n', 2, 'duplicate triple'),
    ('test.txt', b'a\tr\tb\n', 1, 'duplicate triple (first in'),
    ('relations.txt', b'r\ninv_s\n', 2, "starts with 'inv_'"),
    ('entities.txt', b'a\nb\na\nc\n', 3, "duplicate entity name 'a'"),
    ('valid.txt', b'a\ts\t\xff\n', 1, 'not valid UTF-8'),
    ('train.txt', b'', 0, 'no training triples'),
    ('entities.txt', b'', 0, 'no entity names'),
])
def test_malformed_files_name_file_and_line(tmp_path, file, content, line,
                                            message):
    folder = write_kg(tmp_path, {file: content})
    with pytest.raises(KGFormatError) as info:
        load_neural_lp(folder)
    err = info.value
    assert osp.basename(err.path) == file
    assert err.line == line
    assert message in str(err)
    if line:
        assert f'{file}:{line}:' in str(err)


def test_missing_folder_and_file(tmp_path):
    with pytest.raises(KGFormatError, match='not a folder'):
        load_neural_lp(str(tmp_path / 'nope'))
    folder = write_kg(tmp_path, {})
    import os
    os.remove(osp.join(folder, 'valid.txt'))
    with pytest.raises(KGFormatError, match='valid.txt: file not found'):
        load_neural_lp(folder)


def test_relation_without_triples_is_kept(tmp_path):
    folder = write_kg(tmp_path, {'relations.txt': b'r\ns\nunused\n'})
    data = load_neural_lp(folder)
    assert data.num_relations == 3 and data.relation_names[2] == 'unused'
    assert data.edge_type.max() < 2 * 3


@pytest.mark.parametrize('num_nodes', [5, 2**40])
def test_first_duplicate_is_the_first_repeat_read(num_nodes):
    # Against a Python set read in order: the first triple seen before and
    # where it was first (entity ids too large to pack take the fallback).
    from pyg_degreembed.data.io import first_duplicate
    gen = torch.Generator().manual_seed(0)
    for n in (0, 1, 2, 10, 40):
        triples = torch.stack([torch.randint(0, 5, (n, ), generator=gen),
                               torch.randint(0, 2, (n, ), generator=gen),
                               torch.randint(0, 5, (n, ), generator=gen)])
        triples[0] = triples[0] * (num_nodes // 5)
        seen, want = {}, None
        for i, triple in enumerate(triples.t().tolist()):
            if tuple(triple) in seen:
                want = (i, seen[tuple(triple)])
                break
            seen[tuple(triple)] = i
        assert first_duplicate(triples) == want
    assert first_duplicate(torch.tensor([[0, 1], [0, 0], [1, 0]])) is None


@pytest.mark.parametrize('num_nodes', [5, 2**40])
def test_unique_triples_equal_torch_unique_of_columns(num_nodes):
    from pyg_degreembed.data.kg import unique_triples
    gen = torch.Generator().manual_seed(1)
    for n in (0, 1, 50):
        triples = torch.stack([torch.randint(0, 5, (n, ), generator=gen),
                               torch.randint(0, 3, (n, ), generator=gen),
                               torch.randint(0, 5, (n, ), generator=gen)])
        triples[2] = triples[2] * (num_nodes // 5)
        assert torch.equal(unique_triples(triples),
                           torch.unique(triples, dim=1))
