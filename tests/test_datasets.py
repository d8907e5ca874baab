import os.path as osp

import pytest

from pyg_degreembed import KGBenchmark, bundled_path

SHARED = osp.join(osp.dirname(__file__), '..', '..', 'shared', 'datasets')


@pytest.mark.parametrize('name,counts', [
    ('kinship', (104, 25, 2112)),
    ('umls', (135, 46, 1321)),
])
def test_bundled_datasets_work_offline(tmp_path, name, counts):
    dataset = KGBenchmark(str(tmp_path), name)
    data = dataset[0]
    assert (data.num_nodes, dataset.num_relations,
            data.train_edge_type.numel()) == counts
    assert repr(dataset) == f'KGBenchmark({name})'
    # Processed once, then loaded (weights_only) from disk.
    again = KGBenchmark(str(tmp_path), name)[0]
    assert again.relation_names == data.relation_names


def test_unknown_and_missing_datasets(tmp_path):
    with pytest.raises(ValueError, match='Unknown dataset'):
        KGBenchmark(str(tmp_path), 'cora')
    with pytest.raises(FileNotFoundError, match='raw_folder='):
        KGBenchmark(str(tmp_path), 'fb15k-237')
    with pytest.raises(ValueError, match='bundled'):
        bundled_path('wn18')


@pytest.mark.skipif(not osp.isdir(osp.join(SHARED, 'wn18')),
                    reason='shared WN18 folder absent')
def test_wn18_from_a_folder(tmp_path):
    dataset = KGBenchmark(str(tmp_path), 'wn18',
                          raw_folder=osp.join(SHARED, 'wn18'))
    data = dataset[0]
    assert data.num_nodes == 40943 and dataset.num_relations == 18
    assert data.train_edge_type.numel() == 35354
