r"""PyG's own KG datasets, built through the real PyG classes from tiny raw
files written into their raw/ folders (process() runs, nothing is
downloaded), go through as_kg, fit, evaluate and the models."""
import os

import pytest
import torch
from torch_geometric import seed_everything
from torch_geometric.datasets import FB15k_237, RelLinkPredDataset, WordNet18RR

from pyg_degreembed import DegreEmbedReasoner, as_kg, evaluate, explain, fit
from pyg_degreembed.data.kg import split_triples

RELATIONS = ['_hypernym', '_also_see', '_has_part']  # WordNet18RR names


def name_triples(seed=0):
    r"""A small KG as name triples per split (no triple twice)."""
    gen = torch.Generator().manual_seed(seed)
    N, R, E = 14, 3, 70
    key = torch.unique(torch.randint(0, N * R * N, (E, ), generator=gen))
    key = key[torch.randperm(key.numel(), generator=gen)]
    h, r, t = key // (R * N), (key // N) % R, key % N
    rows = [(f'e{a}', RELATIONS[b], f'e{c}')
            for a, b, c in zip(h.tolist(), r.tolist(), t.tolist())]
    n = len(rows)
    return {'train': rows[:n - 12], 'valid': rows[n - 12:n - 6],
            'test': rows[n - 6:]}


def write(folder, name, lines):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), 'w') as f:
        f.write(''.join(line + '\n' for line in lines))


def write_splits(folder, splits):
    for split, rows in splits.items():
        write(folder, f'{split}.txt', ['\t'.join(row) for row in rows])


def named(kg, split):
    triples = split_triples(kg, split).t().tolist()
    return sorted((kg.entity_names[h], kg.relation_names[r],
                   kg.entity_names[t]) for h, r, t in triples)


def check_trains_and_scores(kg_input, kg):
    seed_everything(0)
    model = DegreEmbedReasoner(kg.num_relations, embedding_dim=8,
                               hidden_channels=8)
    result = fit(model, kg_input, epochs=2, lr=0.05, progress=False,
                 log=None)
    assert len(result.history) == 2
    metrics = evaluate(model, kg_input, 'test')
    assert metrics['num_queries'] == 2 * kg.test_edge_type.numel()
    same = evaluate(model, kg, 'test')
    for key in ('mrr', 'mr', 'hits@1', 'hits@10'):
        assert metrics[key] == same[key]
    # The model reasons on the training triples only.
    graph = model.graph(kg_input)
    assert graph.num_edges == 2 * kg.train_edge_type.numel()
    head, relation = kg.test_edge_index[0], kg.test_edge_type
    assert torch.equal(model(kg_input, head, relation),
                       model(kg, head, relation))
    h, r, t = int(head[0]), int(relation[0]), int(kg.test_edge_index[1, 0])
    assert explain(model, kg_input, h, r, t).score == \
        explain(model, kg, h, r, t).score


def test_rel_link_pred_dataset(tmp_path):
    splits = name_triples()
    entities = sorted({e for rows in splits.values() for row in rows
                       for e in (row[0], row[2])})
    raw = tmp_path / 'FB15k-237' / 'raw'
    write(raw, 'entities.dict', [f'{i}\t{e}' for i, e in
                                 enumerate(entities)])
    write(raw, 'relations.dict', [f'{i}\t{r}' for i, r in
                                  enumerate(RELATIONS)])
    write_splits(raw, splits)
    dataset = RelLinkPredDataset(str(tmp_path), 'FB15k-237')
    assert dataset.num_relations == 6  # PyG counts the inverses
    kg = as_kg(dataset)
    assert kg.num_relations == 3 and kg.relation_names == RELATIONS
    assert kg.entity_names == entities
    for split, rows in splits.items():
        assert named(kg, split) == sorted(rows)
    assert kg.facts_edge_index.size(1) == 0
    # The bare Data (no names) gives the same triples.
    bare = as_kg(dataset[0])
    for split in splits:
        assert torch.equal(split_triples(bare, split),
                           split_triples(kg, split))
    check_trains_and_scores(dataset, kg)
    check_trains_and_scores(dataset[0], kg)


def test_wordnet18rr(tmp_path):
    splits = name_triples(1)
    write_splits(tmp_path / 'raw', splits)
    dataset = WordNet18RR(str(tmp_path))
    data = dataset[0]
    kg = as_kg(dataset)
    assert kg.relation_names[:3] == ['_also_see',
                                     '_derivationally_related_form',
                                     '_has_part']
    # All 11 relations of WN18RR, named by the dataset's edge2id.
    assert kg.num_relations == len(WordNet18RR.edge2id) == 11
    for split, mask in (('train', data.train_mask), ('valid', data.val_mask),
                        ('test', data.test_mask)):
        expected = torch.stack([data.edge_index[0, mask],
                                data.edge_type[mask],
                                data.edge_index[1, mask]])
        assert torch.equal(split_triples(kg, split), expected)
        assert expected.size(1) == len(splits[split])
    check_trains_and_scores(dataset, kg)


def test_fb15k_237_one_dataset_per_split(tmp_path):
    splits = name_triples(2)
    write_splits(tmp_path / 'raw', splits)
    datasets = [FB15k_237(str(tmp_path), split=s)
                for s in ('train', 'val', 'test')]
    kg = as_kg(datasets)
    for split, dataset in zip(('train', 'valid', 'test'), datasets):
        data = dataset[0]
        assert torch.equal(split_triples(kg, split), torch.stack(
            [data.edge_index[0], data.edge_type, data.edge_index[1]]))
    assert kg.num_nodes == datasets[0][0].num_nodes
    check_trains_and_scores(datasets, kg)
    with pytest.raises(ValueError, match=r'\(train, valid, test\)'):
        as_kg(datasets[:2])
