r"""Property-based tests (hypothesis) of the loader and the evaluator."""
import os
import tempfile

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_degreembed import filtered_ranks, load_neural_lp
from pyg_degreembed.data.kg import SPLITS, split_triples

names = st.text(alphabet=st.characters(
    blacklist_categories=('Cs', 'Cc', 'Cf', 'Zs', 'Zl', 'Zp')), min_size=1,
    max_size=8)


@st.composite
def kg_files(draw):
    entities = draw(st.lists(names, min_size=2, max_size=8, unique=True))
    relations = draw(st.lists(names.filter(lambda s: not s.startswith(
        'inv_')), min_size=1, max_size=4, unique=True))
    triples = draw(st.lists(st.tuples(
        st.sampled_from(entities), st.sampled_from(relations),
        st.sampled_from(entities)), min_size=1, max_size=30, unique=True))
    split_of = draw(st.lists(st.sampled_from(SPLITS), min_size=len(triples),
                             max_size=len(triples)))
    split_of[0] = 'train'  # at least one training triple
    crlf = draw(st.booleans())
    return entities, relations, triples, split_of, crlf


@settings(max_examples=60, deadline=None)
@given(kg_files())
def test_random_kgs_round_trip_through_files(kg):
    entities, relations, triples, split_of, crlf = kg
    end = '\r\n' if crlf else '\n'
    with tempfile.TemporaryDirectory() as folder:
        def write(name, lines):
            with open(os.path.join(folder, name), 'w', encoding='utf-8',
                      newline='') as f:
                f.write(''.join(line + end for line in lines))

        write('entities.txt', entities)
        write('relations.txt', relations)
        for split in SPLITS:
            write(f'{split}.txt', ['\t'.join(t) for t, s in
                                   zip(triples, split_of) if s == split])
        data = load_neural_lp(folder)
    assert data.entity_names == entities
    assert data.relation_names == relations
    for split in SPLITS:
        loaded = [(entities[h], relations[r], entities[t])
                  for h, r, t in split_triples(data, split).t().tolist()]
        assert loaded == [t for t, s in zip(triples, split_of) if s == split]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(2, 12), st.data())
def test_filtered_ranks_are_bounded_and_ordered(batch, num_nodes, data):
    # Few distinct values, so that ties are frequent.
    values = data.draw(st.lists(st.sampled_from([0., 0.25, 0.5, 1.]),
                                min_size=batch * num_nodes,
                                max_size=batch * num_nodes))
    scores = torch.tensor(values).view(batch, num_nodes)
    target = torch.tensor(data.draw(st.lists(
        st.integers(0, num_nodes - 1), min_size=batch, max_size=batch)))
    pairs = data.draw(st.lists(st.tuples(st.integers(0, batch - 1),
                                         st.integers(0, num_nodes - 1)),
                               max_size=10))
    true_pairs = (torch.tensor([p[0] for p in pairs], dtype=torch.long),
                  torch.tensor([p[1] for p in pairs], dtype=torch.long))
    ranks = filtered_ranks(scores, target, true_pairs)
    o, r, p = (ranks['optimistic'], ranks['realistic'],
               ranks['pessimistic'])
    assert ((1 <= o) & (o <= r) & (r <= p) & (p <= num_nodes)).all()
    # Brute force: count candidates that are not filtered.
    for b in range(batch):
        filtered = {e for q, e in pairs if q == b} | {int(target[b])}
        s = float(scores[b, target[b]])
        others = [float(scores[b, e]) for e in range(num_nodes)
                  if e not in filtered]
        assert o[b] == 1 + sum(v > s for v in others)
        assert p[b] == 1 + sum(v >= s for v in others)
        # Realistic: the expected place among the tied, in random order.
        assert r[b] == 1 + sum(v > s for v in others) + \
            sum(v == s for v in others) / 2
