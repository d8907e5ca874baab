r"""Everyday use: new answers first, visible defaults, progress on long runs,
carrying on in Python from a CLI checkpoint."""
import inspect
import os
import re
import subprocess
import sys

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import RuleReasoner, TrainConfig, fit, predict
from pyg_degreembed.cli import build_parser, main
from pyg_degreembed.data.kg import all_triples, split_triples
from pyg_degreembed.evaluation.ranks import TrueAnswers, rank_queries
from pyg_degreembed.training.progress import Progress

from conftest import chain_kg

PYTHON_GUIDE = os.path.join(os.path.dirname(__file__), '..', 'docs', 'guide',
                            'python.md')


def test_predict_leaves_out_known_triples_and_the_head(toy_kg):
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8).eval()
    head, relation = 0, 0  # parentOf(0, ?): 2 and 3 are known
    scores = model(toy_kg, [head], [relation])[0]
    known = {t for h, r, t in all_triples(toy_kg).t().tolist()
             if h == head and r == relation}
    assert known == {2, 3}
    assert all(scores[e] > 0 for e in (0, 2, 3))  # reached by some path
    expected = [e for e in torch.argsort(scores, descending=True,
                                         stable=True).tolist()
                if scores[e] > 0 and e not in known and e != head]
    answers = predict(model, toy_kg, head, relation, k=6)
    assert [a.entity for a in answers] == expected
    assert not any(a.known or a.is_head for a in answers)
    shown = predict(model, toy_kg, head, relation, k=6, filter_known=False)
    # Known answers are listed and marked; the head is never an answer of a
    # relation that is not reflexive.
    assert {a.entity for a in shown} == {e for e in range(6)
                                         if scores[e] > 0 and e != head}
    assert {a.entity for a in shown if a.known} == known
    assert not any(a.is_head for a in shown)
    assert [a.score for a in shown] == sorted((a.score for a in shown),
                                              reverse=True)
    assert len(predict(model, toy_kg, head, relation, k=1)) == 1
    with pytest.raises(ValueError, match="'k'"):
        predict(model, toy_kg, head, relation, k=-1)


def test_known_answers_of_every_query_against_a_brute_force_lookup(toy_kg):
    # Forward and inverse queries: the known answers of (h, r, ?) are the
    # tails of h's r-triples, those of (h, inv_r, ?) the heads of the
    # r-triples whose tail is h (any split).
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8).eval()
    triples = all_triples(toy_kg).t().tolist()
    R = toy_kg.num_relations
    for head in range(toy_kg.num_nodes):
        for query in range(2 * R):
            known = {t for h, r, t in triples if r == query and h == head} \
                if query < R else \
                {h for h, r, t in triples if r == query - R and t == head}
            shown = predict(model, toy_kg, head, query, k=6,
                            filter_known=False)
            assert {a.entity for a in shown if a.known} == \
                {e for e in known if e in {a.entity for a in shown}}
            kept = predict(model, toy_kg, head, query, k=6)
            assert not {a.entity for a in kept} & known
    # One inverse query by hand: parentOf(?, 3) is 0, 1 (known), both
    # reached, so the filtered answers leave them out.
    shown = predict(model, toy_kg, 3, R + 0, k=6, filter_known=False)
    assert {a.entity for a in shown if a.known} == {0, 1}


def test_predict_keeps_the_head_of_a_reflexive_relation(toy_kg):
    from pyg_degreembed import from_edge_index
    triples = torch.cat([all_triples(toy_kg), torch.tensor([[5], [1],
                                                            [5]])], dim=1)
    kg = from_edge_index(triples[[0, 2]], triples[1], num_nodes=6)
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8).eval()
    scores = model(kg, [2], [1])[0]  # siblingOf(2, ?) can be 2 itself
    assert scores[2] > 0
    assert 2 in [a.entity for a in predict(model, kg, 2, 1)]


def test_cli_predict_filters_and_marks(tmp_path, capsys):
    checkpoint = str(tmp_path / 'family.pt')
    assert main(['train', '--dataset', 'umls', '--dim', '8', '--epochs', '1',
                 '--checkpoint', checkpoint, '--no-progress']) == 0
    capsys.readouterr()
    from pyg_degreembed.data.datasets import load_dataset
    data = load_dataset('umls')
    h, r = int(data.train_edge_index[0, 0]), int(data.train_edge_type[0])
    known = {data.entity_names[t] for a, q, t in all_triples(data).t()
             .tolist() if a == h and q == r}
    assert known
    head, relation = data.entity_names[h], data.relation_names[r]
    argv = ['predict', '--checkpoint', checkpoint, '--head', head,
            '--relation', relation, '--k', str(data.num_nodes)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 'left out' in lines[1]
    named = [line.split()[2] for line in lines[3:] if line.split()[0]
             .isdigit()]
    assert named and not known & set(named) and head not in named
    assert main(argv + ['--show-known']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith('filter: none')
    # Every known answer is reached by its own edge, so all are listed.
    marked = {line.split()[2] for line in lines if '(known' in line}
    assert marked == known


def test_every_option_shows_its_default_and_fit_shares_them(capsys):
    fit_defaults = {k: p.default for k, p in
                    inspect.signature(fit).parameters.items()}
    fit_defaults.update(TrainConfig().to_dict())
    for command in ('train', 'evaluate', 'predict', 'rules', 'explain',
                    'saturation', 'plot'):
        with pytest.raises(SystemExit):
            main([command, '--help'])
        text = ' '.join(capsys.readouterr().out.split())
        parser = build_parser()
        sub = parser._subparsers._group_actions[0].choices[command]
        for action in sub._actions:
            if action.option_strings and action.dest != 'help' and \
                    not action.required:
                assert f'(default: {action.default})' in text, \
                    (command, action.dest)
    train = build_parser().parse_args(['train'])
    for option in ('epochs', 'patience', 'lr', 'seed', 'loss',
                   'progress_interval'):
        assert getattr(train, option) == fit_defaults[option], option
    # The batch: fit's default, halved where its step does not fit.
    assert train.batch_size is None
    with pytest.raises(SystemExit):
        main(['train', '--help'])
    assert f"(None: {fit_defaults['batch_size']}, or the largest power" in \
        ' '.join(capsys.readouterr().out.split())


def test_progress_lines_when_not_a_terminal():
    lines = []
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    fit(model, chain_kg(), epochs=1, batch_size=16, progress_interval=0,
        log=lines.append)
    progress = [line for line in lines if line.startswith('epoch 1: ')]
    # 80 queries in 5 batches: a line after each but the last.
    assert len(progress) == 4
    assert re.fullmatch(r'epoch 1: 1/5 batches, \d+ queries/s, running '
                        r'loss \d+\.\d{4}, ETA \d+s', progress[0])
    assert lines[-1].startswith('epoch   1  loss')
    assert [line for line in lines if line.startswith('validation 1')] == []

    data = chain_kg()
    evaluation = []
    rank_queries(model, model.graph(data), split_triples(data, 'train'),
                 TrueAnswers(all_triples(data), data.num_nodes, 3),
                 batch_size=8, progress=lambda total: Progress(
                     total, 'evaluating', interval=0, log=evaluation.append,
                     terminal=False))
    assert len(evaluation) == 9 and 'ETA' in evaluation[0]
    silent = []
    fit(model, chain_kg(), epochs=1, batch_size=16, progress=False,
        progress_interval=0, log=silent.append)
    # The epoch line only (and a 'threads:' line if the thread guard moves
    # to one thread on a busy machine).
    assert [line for line in silent if not line.startswith('threads:')] \
        == silent[-1:] and silent[-1].startswith('epoch   1  loss')


def test_cli_progress_reaches_a_log_file(tmp_path):
    log = tmp_path / 'log.txt'
    with open(log, 'w') as out:
        proc = subprocess.run(
            [sys.executable, '-m', 'pyg_degreembed.cli', 'train',
             '--dataset', 'umls', '--dim', '8', '--epochs', '1',
             '--progress-interval', '0', '--checkpoint',
             str(tmp_path / 'u.pt')], stdout=out, stderr=subprocess.PIPE,
            text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert re.search(r'^epoch 1: 1/\d+ batches, \d+ queries/s', text, re.M)


def test_continue_in_python_snippet_runs(tmp_path):
    text = open(PYTHON_GUIDE, encoding='utf-8').read()
    code = re.search(r'<!-- snippet:continue -->\n```python\n(.*?)```',
                     text, re.S).group(1)
    assert main(['train', '--dataset', 'family', '--dim', '8', '--epochs',
                 '1', '--checkpoint',
                 str(tmp_path / 'runs' / 'family-degreembed.pt'),
                 '--no-progress']) == 0
    proc = subprocess.run([sys.executable, '-c', code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("[('")
    assert lines[1].startswith('daughter(X,Y) <= ')


def test_predict_takes_names_or_indices():
    kg = chain_kg()
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    by_index = predict(model, kg, 5, 3 + 1, k=5)
    by_name = predict(model, kg, kg.entity_names[5], 'inv_r1', k=5)
    assert by_index == by_name and by_index
    with pytest.raises(ValueError, match="Unknown relation 'inv_r9'"):
        predict(model, kg, 5, 'inv_r9')
