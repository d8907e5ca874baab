r"""Inductive reasoning: three-file folders, a model on another graph with
relations matched by name, and the two inductive protocols (full filtered
ranking and GraIL's Hits@10 among 50) against brute force."""
import itertools
import json
import math

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import (AppliedRules, DegreEmbedReasoner, KGFormatError,
                            align_relations, compute_ranks, evaluate, explain,
                            load_model, load_neural_lp, predict)
from pyg_degreembed.cli import main
from pyg_degreembed.data.kg import all_triples, split_triples
from pyg_degreembed.evaluation.ranks import SAMPLED, TIE_POLICIES, sampled_hits
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.graph_choice import choose_on_graph


def family_triples(prefix: str, n: int, seed: int, extra: bool):
    r"""Triples of a small world where ``lives_in(X, Y) <= works_at(X, Z),
    located_in(Z, Y)`` always holds: n people, n // 4 companies, 3 cities.
    ``extra`` adds a relation only this world has (``likes``)."""
    gen = torch.Generator().manual_seed(seed)
    people = [f'{prefix}p{i}' for i in range(n)]
    companies = [f'{prefix}c{i}' for i in range(n // 4)]
    cities = [f'{prefix}t{i}' for i in range(3)]
    city_of = {c: cities[int(torch.randint(3, (1, ), generator=gen))]
               for c in companies}
    works, lives = [], []
    for p in people:
        c = companies[int(torch.randint(len(companies), (1, ),
                                        generator=gen))]
        works.append((p, 'works_at', c))
        lives.append((p, 'lives_in', city_of[c]))
    located = [(c, 'located_in', t) for c, t in city_of.items()]
    likes = [(people[i], 'likes', people[(i + 1) % n]) for i in range(n)] \
        if extra else []
    return works + located + likes, lives


def write_folder(folder, graph, queries, order=None):
    r"""A three-file folder: the graph and 60% of the ``lives_in`` queries in
    train.txt, 20% in valid.txt and test.txt.  ``order`` permutes the
    lines of train.txt (which fixes the ids)."""
    folder.mkdir()
    n = len(queries)
    train = graph + queries[:int(.6 * n)]
    if order is not None:
        train = [train[i] for i in order(len(train))]
    for name, rows in (('train', train), ('valid', queries[int(.6 * n):
                                                           int(.8 * n)]),
                       ('test', queries[int(.8 * n):])):
        (folder / f'{name}.txt').write_text(
            ''.join(f'{h}\t{r}\t{t}\n' for h, r, t in rows))
    return str(folder)


@pytest.fixture
def pair(tmp_path):
    r"""A training world (with the extra relation ``likes``) and an
    inductive world: other entities, a subset of the relations, written in
    another order so that relation and entity ids differ."""
    graph, queries = family_triples('a', 80, 0, extra=True)
    train = write_folder(tmp_path / 'world', graph, queries)
    graph, queries = family_triples('b', 60, 1, extra=False)
    ind = write_folder(tmp_path / 'world_ind', graph, queries,
                       order=lambda n: list(reversed(range(n))))
    return train, ind


def test_three_file_folder_loads_with_names_in_order_of_appearance(pair):
    data = load_neural_lp(pair[0])
    lines = [line.split('\t') for line in
             open(f'{pair[0]}/train.txt').read().splitlines()]
    assert data.relation_names[:2] == ['works_at', 'located_in']
    assert data.entity_names[:2] == [lines[0][0], lines[0][2]]
    assert data.facts_edge_type.numel() == 0  # every train triple a query
    assert data.train_edge_type.numel() == len(lines)
    assert data.edge_type.numel() == 2 * len(lines)  # with inverses
    h, r, t = split_triples(data, 'train')[:, 0].tolist()
    assert [data.entity_names[h], data.relation_names[r],
            data.entity_names[t]] == lines[0]


def test_three_file_folder_errors_name_file_and_line(tmp_path):
    folder = tmp_path / 'kg'
    folder.mkdir()
    (folder / 'train.txt').write_text('a\tr\tb\nb\tr\tc\n')
    (folder / 'valid.txt').write_text('a\tr\tc\nc\tinv_r\ta\n')
    (folder / 'test.txt').write_text('c\tr\ta\n')
    with pytest.raises(KGFormatError, match=r"valid.txt:2: relation name "
                       "'inv_r' starts with 'inv_'"):
        load_neural_lp(str(folder))
    (folder / 'valid.txt').write_text('a\tr\tc\nc\t\ta\n')
    with pytest.raises(KGFormatError, match=r'valid.txt:2: empty relation'):
        load_neural_lp(str(folder))
    (folder / 'valid.txt').write_text('a\tr\tc\n')
    assert load_neural_lp(str(folder)).num_nodes == 3
    (folder / 'entities.txt').write_text('a\nb\nc\n')
    with pytest.raises(KGFormatError, match=r'relations.txt: file not found '
                       r'\(entities.txt and relations.txt go together'):
        load_neural_lp(str(folder))


def test_relations_matched_by_name_give_the_same_scores(pair, tmp_path):
    seed_everything(0)
    data = load_neural_lp(pair[0])
    model = DegreEmbedReasoner(data.num_relations, embedding_dim=8,
                               hidden_channels=8).eval()
    # The same KG with the lines of every file reversed: other relation and
    # entity ids.
    (tmp_path / 'reversed').mkdir()
    for split in ('train', 'valid', 'test'):
        lines = open(f'{pair[0]}/{split}.txt').read().splitlines()
        (tmp_path / 'reversed' / f'{split}.txt').write_text(
            '\n'.join(reversed(lines)) + '\n')
    other = load_neural_lp(str(tmp_path / 'reversed'))
    assert other.relation_names != data.relation_names
    aligned = align_relations(other, data.relation_names)
    assert aligned.relation_names == data.relation_names
    entity = torch.tensor([other.entity_names.index(name)
                           for name in data.entity_names])  # data id -> other
    heads = torch.arange(data.num_nodes)
    for q in range(2 * data.num_relations):
        relation = torch.full_like(heads, q)
        expected = model(data, heads, relation)
        got = model(aligned, entity[heads], relation)[:, entity]
        assert torch.allclose(got, expected, atol=1e-6)
    assert evaluate(model, aligned)['mrr'] == \
        pytest.approx(evaluate(model, data)['mrr'])


def test_unknown_relation_is_an_error_naming_it(pair, tmp_path, capsys):
    data = load_neural_lp(pair[0])
    ind = load_neural_lp(pair[1])
    with pytest.raises(ValueError, match="relation 'likes' is not one the "
                       r'model knows; the model was trained on 3 relations '
                       r'\(lives_in, located_in, works_at\)'):
        align_relations(data, ind.relation_names)
    # Without alignment, the model refuses the KG and says what to do.
    model = DegreEmbedReasoner(data.num_relations, embedding_dim=4,
                               hidden_channels=4)
    with pytest.raises(ValueError, match='align_relations'):
        model(ind, [0], [0])
    checkpoint = str(tmp_path / 'ind.pt')
    assert main(['train', '--dataset', pair[1], '--dim', '4', '--epochs',
                 '1', '--checkpoint', checkpoint, '--no-progress']) == 0
    capsys.readouterr()
    assert main(['evaluate', '--checkpoint', checkpoint, '--graph',
                 pair[0]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: relation 'likes' of ") and \
        len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit) as info:  # argparse's exit, one line
        main(['evaluate', '--checkpoint', checkpoint, '--graph', pair[0],
              '--dataset', pair[1]])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert 'argument --dataset: not allowed with argument --graph' in err
    assert len(err.strip().splitlines()) == 1


def test_trained_model_reasons_on_a_new_graph(pair, tmp_path, capsys,
                                              device):
    checkpoint = str(tmp_path / 'world.pt')
    assert main(['train', '--dataset', pair[0], '--dim', '16', '--epochs',
                 '5', '--batch-size', '16', '--lr', '0.01', '--checkpoint',
                 checkpoint, '--no-progress', '--device', str(device)]) == 0
    capsys.readouterr()
    model, graph = load_model(checkpoint, graph=pair[1], device=device)
    assert graph.num_relations == 4  # the model's relations, 'likes' unused
    assert graph.entity_names[0].startswith('b')  # entities never seen
    payload = load_checkpoint(checkpoint)
    # The constant rules name the training KG's entities: refused on the
    # new graph, left out for it (as the command line does).
    with pytest.raises(ValueError, match='without_constants'):
        scorer_from_checkpoint(payload, model)(graph, [0], [0])
    applied = scorer_from_checkpoint(payload, model, 'rules', new_graph=True)
    assert isinstance(applied, AppliedRules)
    assert applied.constant_rules is None
    # Under the u chosen for new graphs (on validation without the
    # constant rules), from the rules' counts.
    u = payload['new_graph']['unseen']
    assert torch.allclose(applied.confidence, applied.support.double() / (
        applied.groundings.double() + u))
    auto = scorer_from_checkpoint(payload, model, new_graph=True)
    for scorer, name in ((model, 'model'), (applied, 'rules'),
                         (auto, 'auto')):
        out = str(tmp_path / f'ind-{name}.json')
        assert main(['evaluate', '--checkpoint', checkpoint, '--graph',
                     pair[1], '--json', out, '--device', str(device),
                     '--scorer', name, '--graph-choice', '0']) == 0
        text = capsys.readouterr().out
        assert 'H@10(50)' in text
        assert ((f'on a new graph: the rules without their constant rules, '
                 f'u = {u:g}') in text) == (scorer is not model)
        metrics = json.load(open(out))['metrics']
        # Against the ranks counted from the dense scores of every query.
        better, tied, _ = brute_force(scorer, graph).t().double()
        assert metrics['realistic']['mrr'] == pytest.approx(
            float((1 / (1 + better + tied / 2)).mean()))
        assert metrics['optimistic']['hits@1'] == pytest.approx(
            float((better == 0).double().mean()))
    # By default the choice is made on the new graph's own triples.
    out = str(tmp_path / 'ind-graph.json')
    assert main(['evaluate', '--checkpoint', checkpoint, '--graph', pair[1],
                 '--json', out, '--device', str(device)]) == 0
    text = capsys.readouterr().out
    assert 'on a new graph: ' in text and ' observed triples' in text
    choice = choose_on_graph(AppliedRules.from_payload(
        payload['rules'], tie_break=model).to(device), graph,
        payload['new_graph']['unseen'])
    assert json.load(open(out))['metrics']['realistic']['mrr'] == \
        pytest.approx(compute_ranks(choice.scorer, graph).mrr())
    assert main(['evaluate', '--checkpoint', checkpoint, '--graph', pair[1],
                 '--graph-choice', '-1']) == 2
    assert '--graph-choice must be at least 0, got -1' in \
        capsys.readouterr().err
    expected = evaluate(model, graph)
    # The rule lives_in <= works_at, located_in carries over to the new
    # world: every test query is answered (3 cities, one right).
    assert expected['mrr'] > 0.9
    assert expected['hits@1'] > 0.85

    # predict and explain on the new graph, by name.
    names = graph.entity_names
    h, _, t = split_triples(graph, 'test')[:, 0].tolist()
    q = graph.relation_names.index('lives_in')
    assert predict(model, graph, h, q, k=1,
                   filter_known=False)[0].entity == t
    paths = explain(model, graph, h, q, t).paths
    assert [graph.relation_names[k] for k in paths[0].body] == \
        ['works_at', 'located_in']
    assert main(['explain', '--checkpoint', checkpoint, '--graph', pair[1],
                 '--head', names[h], '--relation', 'lives_in', '--tail',
                 names[t]]) == 0
    assert 'works_at' in capsys.readouterr().out


def brute_force(model, data):
    r"""Per test query (both directions): the counts of better and tied
    non-answers, and the non-answer scores, from the dense score matrix."""
    R = data.num_relations
    known = {tuple(x) for x in all_triples(data).t().tolist()}
    rows = []
    test = split_triples(data, 'test').t().tolist()
    # All tail queries, then all head queries, as compute_ranks orders them.
    for direction in range(2):
        for h, r, t in test:
            head, q, answer = (h, r, t) if direction == 0 else (t, r + R, h)
            scores = model(data, [head], [q])[0]
            others = [e for e in range(data.num_nodes) if e != answer and (
                (head, q, e) if q < R else (e, q - R, head)) not in known]
            scores = scores.cpu()
            s = scores[others]
            rows.append((int((s > scores[answer]).sum()),
                         int((s == scores[answer]).sum()), len(others)))
    return torch.tensor(rows)


def test_both_protocols_against_brute_force(pair, device):
    seed_everything(1)
    train = load_neural_lp(pair[0])
    model = DegreEmbedReasoner(train.num_relations, embedding_dim=8,
                               hidden_channels=8).eval().to(device)
    graph = align_relations(load_neural_lp(pair[1]), train.relation_names)
    ranks = compute_ranks(model, graph, 'test')
    better, tied, candidates = brute_force(model, graph).t()
    assert torch.equal(ranks.ranks['optimistic'], 1. + better)
    assert torch.equal(ranks.ranks['pessimistic'], 1. + better + tied)
    assert torch.equal(ranks.candidates, candidates)
    # Full ranking over the graph's entities: MRR of the realistic ranks.
    metrics = ranks.metrics('realistic')
    assert metrics['mrr'] == pytest.approx(
        float((1 / (1 + better + tied / 2.)).mean()))

    # H@10(50): Monte Carlo over 49 non-answers drawn without replacement,
    # ties in random order.
    gen = torch.Generator().manual_seed(0)
    draws = 2000
    estimate = {tie: [] for tie in TIE_POLICIES}
    for g, e, n in zip(better.tolist(), tied.tolist(), candidates.tolist()):
        m = min(49, n)
        pick = torch.rand(draws, n, generator=gen).argsort(dim=1)[:, :m]
        b = (pick < g).sum(1)
        c = ((pick >= g) & (pick < g + e)).sum(1)
        above = (torch.rand(draws, generator=gen) * (c + 1)).floor()
        estimate['optimistic'].append((b <= 9).double().mean())
        estimate['pessimistic'].append((b + c <= 9).double().mean())
        estimate['realistic'].append((b + above <= 9).double().mean())
    for tie in TIE_POLICIES:
        mc = float(torch.stack(estimate[tie]).mean())
        # 2000 draws per query, ~300 queries: standard error < 0.003.
        assert ranks.metrics(tie)[SAMPLED] == pytest.approx(mc, abs=0.01)
    assert ranks.metrics('optimistic')[SAMPLED] >= metrics[SAMPLED] >= \
        ranks.metrics('pessimistic')[SAMPLED]


def test_sampled_hits_equals_exhaustive_enumeration():
    # 7 candidates (2 better, 3 tied, 2 worse), 4 drawn, Hits@2: every draw
    # and every order of the tied entities with the answer, counted.
    g, e, n, m, k = 2, 3, 7, 4, 2
    kinds = ['better'] * g + ['tied'] * e + ['worse'] * (n - g - e)
    hits = {tie: 0. for tie in TIE_POLICIES}
    draws = list(itertools.combinations(range(n), m))
    for draw in draws:
        b = sum(kinds[i] == 'better' for i in draw)
        c = sum(kinds[i] == 'tied' for i in draw)
        hits['optimistic'] += b <= k - 1
        hits['pessimistic'] += b + c <= k - 1
        # The answer's place among its c tied: uniform in 0..c.
        hits['realistic'] += sum(b + above <= k - 1
                                 for above in range(c + 1)) / (c + 1)
    for tie in TIE_POLICIES:
        got = sampled_hits(torch.tensor([g]), torch.tensor([e]),
                           torch.tensor([n]), k=k, num_negatives=m, tie=tie)
        assert float(got) == pytest.approx(hits[tie] / len(draws))
    # Fewer candidates than draws: all are drawn, the hit is certain or not.
    assert float(sampled_hits(torch.tensor([3]), torch.tensor([0]),
                              torch.tensor([5]), k=3)) == 0.
    assert math.isclose(float(sampled_hits(
        torch.tensor([1]), torch.tensor([0]), torch.tensor([5]), k=3)), 1.)


def hypergeometric_hits(g, e, n, tie, k=10, m=49):
    # Plain-Python reference: draw min(m, n) of n candidates (g better, e
    # tied), sum P(b better, c tied drawn) times the chance of a hit.
    m = min(m, n)
    total = 0.
    for b in range(min(g, m) + 1):
        for c in range(min(e, m - b) + 1):
            p = math.comb(g, b) * math.comb(e, c) * \
                math.comb(n - g - e, m - b - c) / math.comb(n, m)
            if tie == 'optimistic':
                hit = b <= k - 1
            elif tie == 'pessimistic':
                hit = b + c <= k - 1
            else:
                hit = sum(b + above <= k - 1 for above in range(c + 1)) / \
                    (c + 1)
            total += p * hit
    return total


@pytest.mark.parametrize('g, e, n', [(30, 0, 300), (15, 10, 200),
                                     (40, 30, 400), (8, 60, 120),
                                     (2, 45, 50)])
def test_sampled_hits_defaults_with_many_better_and_tied(g, e, n):
    # GraIL's protocol as called by Ranks.metrics: Hits@10 among the answer
    # and 49 non-answers (the defaults), in every tie policy.
    for tie in TIE_POLICIES:
        got = float(sampled_hits(torch.tensor([g]), torch.tensor([e]),
                                 torch.tensor([n]), tie=tie))
        assert got == pytest.approx(hypergeometric_hits(g, e, n, tie),
                                    abs=1e-9)
    # The cases tell the policies and the number of draws apart.
    values = {tie: hypergeometric_hits(g, e, n, tie) for tie in TIE_POLICIES}
    assert e == 0 or values['optimistic'] > values['realistic'] > \
        values['pessimistic']
    assert values['realistic'] != pytest.approx(
        hypergeometric_hits(g, e, n, 'realistic', m=50), abs=1e-6)
