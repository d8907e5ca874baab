import json
import math
import re

import pytest
import torch

from pyg_degreembed import AppliedRules, load_model
from pyg_degreembed.cli import main
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.training.checkpoint import load_checkpoint

from conftest import assert_picture, brute_force_attention_rules


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp('cli')
    checkpoint = str(folder / 'kinship.pt')
    code = main(['train', '--dataset', 'kinship', '--dim', '8', '--epochs',
                 '1', '--checkpoint', checkpoint, '--no-progress'])
    assert code == 0
    return folder, checkpoint


def test_train_writes_checkpoint_and_metrics(trained, capsys):
    folder, checkpoint = trained
    metrics = json.loads((folder / 'kinship.json').read_text())
    assert metrics['split'] == 'test'
    m = metrics['metrics']
    assert m['optimistic']['mrr'] >= m['realistic']['mrr'] >= \
        m['pessimistic']['mrr'] > 0
    # Each realistic rank is the mean of the other two, and so is MR.
    assert m['realistic']['mr'] == pytest.approx(
        (m['optimistic']['mr'] + m['pessimistic']['mr']) / 2)
    assert m['realistic']['num_queries'] == 2200
    assert 'Term3' in m['realistic']['per_relation']


def test_evaluate_predict_rules_explain(trained, capsys, tmp_path):
    _, checkpoint = trained
    assert main(['evaluate', '--checkpoint', checkpoint, '--split', 'valid',
                 '--json', str(tmp_path / 'm.json')]) == 0
    assert 'filtered valid metrics (2198 queries' in capsys.readouterr().out

    assert main(['predict', '--checkpoint', checkpoint, '--head',
                 'Person46', '--relation', 'Term3', '--k', '3']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'query: Person46 Term3 ?'
    assert lines[1].startswith('filter: answers already in the KG')
    assert len(lines) == 6 and lines[3].split()[0] == '1'

    assert main(['rules', '--checkpoint', checkpoint, '--relation',
                 'inv_Term3', '--k', '2', '--json',
                 str(tmp_path / 'r.json'), '--confidence', 'attention']) == 0
    rules = json.loads((tmp_path / 'r.json').read_text())
    assert len(rules) == 2 and rules[0]['head'] == 'inv_Term3'
    model = load_model(checkpoint)[0]
    expected = brute_force_attention_rules(
        model, model.num_relations + model_relation(checkpoint, 'Term3'), 2)
    assert [r['confidence'] for r in rules] == pytest.approx(
        [value for _, value in expected])
    assert rules[0]['confidence_kind'] == 'attention'
    printed = capsys.readouterr().out.splitlines()
    assert printed == [rule['text'] for rule in rules]
    assert printed[0].startswith('Term3(Y,X) <= ')

    assert main(['explain', '--checkpoint', checkpoint, '--head',
                 'Person46', '--relation', 'Term3', '--tail', 'Person61',
                 '--k', '3']) == 0
    out = capsys.readouterr().out
    assert out.startswith('score of Person61 for Person46 Term3 ?')

    # A training fact is explained by its own edge, or without it.
    from pyg_degreembed.data.datasets import load_dataset
    data = load_dataset('kinship')
    h, r, t = data.train_edge_index[0, 0], data.train_edge_type[0], \
        data.train_edge_index[1, 0]
    h, r, t = (data.entity_names[h], data.relation_names[r],
               data.entity_names[t])
    fact = f'{r}({h},{t})'
    for flag in ([], ['--remove-edge']):
        assert main(['explain', '--checkpoint', checkpoint, '--head', h,
                     '--relation', r, '--tail', t, '--k', '1000'] +
                    flag) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].endswith('? without its edge' if flag else '?',
                                 0, lines[0].rfind(':'))
        assert any(line.split()[0] == fact for line in lines[1:]) == \
            (not flag)


def test_evaluate_with_sampled_candidates(trained, capsys, tmp_path):
    # The printed protocol, and the metrics of compute_ranks with the same
    # draw: each answer against 20 of its filtered candidates.
    from pyg_degreembed import compute_ranks
    from pyg_degreembed.training.checkpoint import scorer_from_checkpoint
    _, checkpoint = trained
    out = tmp_path / 'sampled.json'
    assert main(['evaluate', '--checkpoint', checkpoint, '--split', 'valid',
                 '--eval-candidates', '20', '--json', str(out)]) == 0
    assert 'ranked against 20 of its filtered candidates' in \
        capsys.readouterr().out
    metrics = json.loads(out.read_text())
    assert metrics['eval_candidates'] == 20
    model, data = load_model(checkpoint)
    scorer = scorer_from_checkpoint(load_checkpoint(checkpoint), model,
                                    'auto')
    ranks = compute_ranks(scorer, data, 'valid', num_candidates=20)
    assert metrics['metrics']['realistic']['mrr'] == pytest.approx(
        float((1 / ranks.ranks['realistic']).mean()))
    assert metrics['metrics']['realistic']['num_candidates'] == 20
    assert (ranks.ranks['pessimistic'] <= 21).all()
    with pytest.raises(SystemExit) as info:
        main(['evaluate', '--checkpoint', checkpoint, '--eval-candidates',
              '0'])
    assert info.value.code == 2
    assert 'expected a whole number of at least 1' in capsys.readouterr().err


@pytest.mark.parametrize('argv,message', [
    (['predict', '--head', 'Nobody', '--relation', 'Term3'],
     "unknown entity 'Nobody'"),
    (['predict', '--head', 'Person46', '--relation', 'Term99'],
     "unknown relation 'Term99'"),
    (['evaluate', '--dataset', 'umls'], 'trained on a KG with 25 relations, '
     'but this KG has 46'),
    (['evaluate', '--dataset', 'no/such/folder'], 'neither a bundled'),
])
def test_errors_are_one_line_with_status_2(trained, capsys, argv, message):
    _, checkpoint = trained
    code = main(argv[:1] + ['--checkpoint', checkpoint] + argv[1:])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith('error: ') and message in err
    assert len(err.strip().splitlines()) == 1


def test_missing_checkpoint(capsys, tmp_path):
    assert main(['rules', '--checkpoint', str(tmp_path / 'x.pt')]) == 2
    assert 'checkpoint file not found' in capsys.readouterr().err


def test_help_on_every_command(capsys):
    for command in ['train', 'evaluate', 'predict', 'rules', 'explain']:
        with pytest.raises(SystemExit) as info:
            main([command, '--help'])
        assert info.value.code == 0
        assert 'usage: pyg-degreembed ' + command in capsys.readouterr().out


def test_saturation_command(capsys, tmp_path):
    assert main(['saturation', '--dataset', 'family', '--relation',
                 'brother', '--top', '1', '--json',
                 str(tmp_path / 's.json')]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == ('| brother(X,Y) <= brother(X,Z), brother(Z,Y) | 0.86 '
                      '| 0.14 | 0.12 |')
    values = json.loads((tmp_path / 's.json').read_text())
    assert values[0]['pattern'] == ['brother', 'brother']


def test_plot_command(trained, tmp_path, capsys):
    _, checkpoint = trained
    out = tmp_path / 'tsne.png'
    assert main(['plot', '--checkpoint', checkpoint, '--out', str(out)]) == 0
    assert_picture(str(out))


def test_edge_weight_options(capsys):
    from pyg_degreembed.cli import build_parser
    parser = build_parser()
    args = parser.parse_args(['train', '--edge-weight-lr', 'none'])
    assert args.edge_weight_lr is None
    assert parser.parse_args(['train']).edge_weight_lr == 1e-4
    assert parser.parse_args(['train', '--edge-weight-lr', '3e-4']
                             ).edge_weight_lr == 3e-4
    assert parser.parse_args(['train']).edge_weight_decay == 0.1
    assert parser.parse_args(['train', '--edge-weight-decay', '0']
                             ).edge_weight_decay == 0.
    with pytest.raises(SystemExit):
        parser.parse_args(['train', '--edge-weight-lr', 'fast'])
    assert "expected a number or 'none', got 'fast'" in \
        capsys.readouterr().err


def test_interrupt_exits_130_with_one_line(monkeypatch, capsys):
    # Ctrl-C during a command: status 130 (128 + SIGINT), one error line,
    # no traceback.
    import pyg_degreembed.cli.analysis as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, 'cmd_saturation', interrupted)
    assert main(['saturation', '--dataset', 'family']) == 130
    err = capsys.readouterr().err
    assert err == 'error: interrupted\n'


def test_applied_rules_in_rules_explain_and_evaluate(trained, capsys,
                                                     tmp_path):
    folder, checkpoint = trained
    out = tmp_path / 'applied.json'
    assert main(['rules', '--checkpoint', checkpoint, '--applied',
                 '--relation', 'Term3', '--k', '2', '--json', str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rules = json.loads(out.read_text())
    assert [r['text'] for r in rules] == lines
    # Path and constant rules: answer-type rules are not mined by default.
    assert [r['kind'] for r in rules] == ['path', 'path', 'constant',
                                          'constant']
    for kind in ('path', 'constant'):
        confidence = [r['confidence'] for r in rules if r['kind'] == kind]
        assert confidence == sorted(confidence, reverse=True)
        assert 0 < confidence[-1] < 1
    assert all(line.startswith('Term3(X,Y) <= ') for line in lines[:2])
    # A constant rule names its answer, an entity of the KG.
    head = lines[2].split(' <= ')[0]
    assert head.startswith('Term3(X,') and \
        head[len('Term3(X,'):-1] in load_dataset('kinship').entity_names
    # evaluate: by default the scorer train chose on validation (its test
    # metrics are the training run's), either on request.
    metrics = {}
    for scorer in ('rules', 'model', 'auto'):
        assert main(['evaluate', '--checkpoint', checkpoint, '--scorer',
                     scorer, '--json', str(tmp_path / f'{scorer}.json')]) == 0
        printed = capsys.readouterr().out
        metrics[scorer] = json.loads(
            (tmp_path / f'{scorer}.json').read_text())['metrics']
        assert ('(--scorer model: the model alone)' in printed) == (
            metrics[scorer] == metrics['rules'])
    chosen = load_checkpoint(checkpoint)['scorer']
    if chosen == 'per-relation':  # one of them per query relation
        assert 'scorer: per query relation, the model' in printed
    else:
        assert metrics['auto'] == metrics[chosen]
    assert metrics['auto'] == json.loads(
        (folder / 'kinship.json').read_text())['metrics']
    assert metrics['model']['realistic']['mrr'] != \
        metrics['rules']['realistic']['mrr']


def train_rules(kg, checkpoint, aggregation):
    # A small model ranked by its applied rules under an --aggregation.
    checkpoint = str(checkpoint)
    assert main(['train', '--dataset', str(kg), '--dim', '4', '--epochs',
                 '1', '--batch-size', '16', '--checkpoint', checkpoint,
                 '--no-progress', '--scorer', 'rules', '--steps', '2',
                 '--aggregation', aggregation]) == 0
    return checkpoint


def test_cut_rules_keeps_the_rules_of_the_length_chosen(
        tmp_path, capsys, monkeypatch):
    # --cut-rules: stage 2 of the choice ranks the rules of up to 3 and of
    # up to 2 edges (here the last forced); the checkpoint keeps the rules
    # of the length chosen, and says so.
    from pyg_degreembed.training import scorer as scorer_module
    kg = tmp_path / 'kg.tsv'
    kg.write_text(''.join(f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 40}\n'
                          for i in range(300)))
    settings = []

    def last(options):  # the first u, the last (length, aggregation)
        settings.append(len(options))
        return 0 if len(settings) == 1 else len(options) - 1

    monkeypatch.setattr(scorer_module, 'preferred_choice', last)
    checkpoint = str(tmp_path / 'm.pt')
    assert main(['train', '--dataset', str(kg), '--dim', '4', '--epochs',
                 '1', '--batch-size', '16', '--checkpoint', checkpoint,
                 '--no-progress', '--scorer', 'rules', '--steps', '3',
                 '--aggregation', 'max-plus', '--cut-rules']) == 0
    assert settings[1] == 2  # max-plus of 3 rules, under 3 and 2 edges
    assert 'path rules of length <= 2' in capsys.readouterr().out
    rules = load_checkpoint(checkpoint)['rules']
    assert rules['config']['num_steps'] == 2
    assert 0 < rules['pattern'].numel() and \
        bool((rules['pattern'] < (2 * 3 + 1)**2).all())


def test_prune_keeps_the_rules_met_as_often_as_chosen(
        tmp_path, capsys, monkeypatch):
    # --prune: the checkpoint keeps the rules met at least as often as the
    # support chosen (here any prune allowed: the largest tried, 3), and
    # the command says how many of them.
    from pyg_degreembed.cli import train as train_module
    from pyg_degreembed.training import scorer as scorer_module
    kg = tmp_path / 'kg.tsv'
    kg.write_text(''.join(f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 40}\n'
                          for i in range(300)))
    monkeypatch.setattr(scorer_module, 'PRUNE_TOLERANCE', 1.)
    monkeypatch.setattr(train_module, 'PRUNE_SUPPORTS', (3, ))
    checkpoint = str(tmp_path / 'm.pt')
    assert main(['train', '--dataset', str(kg), '--dim', '4', '--epochs',
                 '1', '--batch-size', '16', '--checkpoint', checkpoint,
                 '--no-progress', '--scorer', 'rules', '--steps', '2',
                 '--aggregation', 'max-plus', '--prune']) == 0
    out = capsys.readouterr().out
    assert 'rules kept: those met >= 3 times' in out
    rules = load_checkpoint(checkpoint)['rules']
    support = rules['constant_rules']['support']
    kept, mined = map(int, re.search(r'(\d+) of (\d+) constant rules',
                                     out).groups())
    assert 0 < support.numel() == kept < mined
    assert bool((support >= 3).all()) and bool((rules['support'] >= 3).all())


def test_rules_and_model_combined_score_and_its_evidence(tmp_path, capsys):
    # --aggregation combined: the rules' noisy-or with the model's evidence;
    # explain lists the parts, whose evidence adds up to the score that
    # predict shows.
    kg = tmp_path / 'kg.tsv'
    kg.write_text(''.join(f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 40}\n'
                          for i in range(300)))
    checkpoint = train_rules(kg, tmp_path / 'm.pt', 'combined')
    out = capsys.readouterr().out
    assert 'and the model (weight' in out
    weight = load_checkpoint(checkpoint)['rules']['config']['model_weight']
    assert weight in (0.1, 0.3, 0.5)
    assert main(['predict', '--checkpoint', checkpoint, '--head', 'e1',
                 '--relation', 'r1', '--k', '1', '--show-known']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f'the noisy-or of the applied rules and the model (weight ' \
        f'{weight:g})' in lines[2]
    _, score, tail = lines[3].split()[:3]
    assert main(['explain', '--checkpoint', checkpoint, '--head', 'e1',
                 '--relation', 'r1', '--tail', tail]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines)
              if line.startswith('noisy-or score '))
    total = float(lines[at].split()[-1].rstrip(':'))
    assert float(lines[at].split()[2]) == pytest.approx(float(score),
                                                        rel=1e-3)
    parts = [line.split() for line in lines[at + 1:]]
    assert parts[-1][4:6] == ['the', 'model']
    assert sum(float(part[0]) for part in parts) == pytest.approx(
        total, abs=1e-3 * len(parts))
    assert 1 - math.exp(-total) == pytest.approx(float(score), rel=1e-3)


def test_non_redundant_rules_and_their_evidence(tmp_path, capsys):
    # --aggregation non-redundant: rules whose predictions overlap count
    # once; the checkpoint keeps the overlaps, and explain shows one rule
    # per cluster as evidence, adding up to its noisy-or score.
    # r2 is r0 followed by r1 and r3 a copy of r2 (whole in the facts, the
    # r0 triples split), so that the rules r0 <= r2, inv_r1 and
    # r0 <= r3, inv_r1 predict the same.
    kg = tmp_path / 'kg'
    kg.mkdir()
    rows = {'facts': [], 'train': [], 'valid': [], 'test': []}
    for i in range(60):
        f, g = f'f{i * 7 % 60}', f'g{i * 11 % 60}'
        rows['facts'] += [f'{f}\tr1\t{g}', f'e{i}\tr2\t{g}', f'e{i}\tr3\t{g}']
        rows['train' if i < 40 else 'valid' if i < 50 else 'test'].append(
            f'e{i}\tr0\t{f}')
    for split, lines in rows.items():
        (kg / f'{split}.txt').write_text('\n'.join(lines) + '\n')
    checkpoint = train_rules(kg, tmp_path / 'm.pt', 'non-redundant')
    assert '(those overlapping >= 0.7 counted once)' in \
        capsys.readouterr().out
    payload = load_checkpoint(checkpoint)
    assert payload['rules']['config']['redundancy'] == 0.7
    applied = AppliedRules.from_payload(payload['rules'])
    cluster = applied.clusters(0.7)
    assert torch.unique(cluster).numel() < applied.num_rules
    texts = {}  # each rule's text and its cluster
    for q in range(2 * applied.num_relations):
        for rule in applied.rules(q):
            key = q * applied._num_patterns + sum(
                (k + 1) * (2 * applied.num_relations + 1) ** (
                    len(rule.body) - 1 - i) for i, k in enumerate(rule.body))
            index = int((applied.rule_key == key).nonzero())
            texts[rule.format(payload['kg']['relation_names'])] = \
                int(cluster[index])
    merged = 0
    for head in range(60):
        assert main(['predict', '--checkpoint', checkpoint, '--head',
                     f'e{head}', '--relation', 'r0', '--k', '1',
                     '--show-known']) == 0
        lines = capsys.readouterr().out.splitlines()
        if len(lines) < 4 or lines[3].strip().startswith('(no '):
            continue
        tail = lines[3].split()[2]
        assert main(['explain', '--checkpoint', checkpoint, '--head',
                     f'e{head}', '--relation', 'r0', '--tail', tail,
                     '--k', '100']) == 0
        lines = capsys.readouterr().out.splitlines()
        at = next(i for i, line in enumerate(lines)
                  if line.startswith('noisy-or score '))
        listed = [line for line in lines[next(
            i for i, line in enumerate(lines)
            if line.startswith('applied rules that')) + 1:at]
            if line.strip() != 'none']
        parts = [line.split(maxsplit=4)[-1] for line in lines[at + 1:]]
        clusters = [texts[part] for part in parts]
        # One part per cluster that reaches the answer.
        assert len(set(clusters)) == len(clusters) == len(
            {texts[line.strip()] for line in listed})
        score, total = lines[at].split()[2], lines[at].split()[-1]
        assert 1 - math.exp(-float(total.rstrip(':'))) == pytest.approx(
            float(score), rel=1e-3)
        merged += len(listed) - len(parts)
    assert merged > 0  # redundant rules reached some answers


def model_relation(checkpoint, name):
    return list(load_checkpoint(checkpoint)['kg']['relation_names']).index(
        name)


def test_max_steps_ends_training_and_resume_goes_on(tmp_path, capsys):
    kg = tmp_path / 'kg.tsv'
    kg.write_text(''.join(f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 40}\n'
                          for i in range(300)))
    argv = ['train', '--dataset', str(kg), '--dim', '4', '--epochs', '2',
            '--batch-size', '16', '--checkpoint', str(tmp_path / 'm.pt'),
            '--no-progress', '--scorer', 'model']
    assert main(argv + ['--max-steps', '3']) == 0
    out = capsys.readouterr().out
    assert 'stopped at step 3 of epoch 1 (max_steps=3); kept the current ' \
        'weights (no epoch completed); resume from the checkpoint' in out
    assert 'filtered test metrics' in out
    assert main(argv + ['--resume']) == 0
    out = capsys.readouterr().out
    assert 'resumed from' in out and 'epoch   2' in out
    state = load_checkpoint(str(tmp_path / 'm.pt'))['state']
    assert state['epoch'] == 2 and state['partial'] is None
    # 60 training triples (6:2:1:1 of 300), both directions: 120 queries,
    # 8 steps an epoch.
    assert state['global_step'] == 2 * 8


def test_readable_queries_indices_version_help(tmp_path, capsys):
    from pyg_degreembed.version import __version__

    from conftest import trained_toy
    kg, checkpoint = trained_toy(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(['--version'])
    assert capsys.readouterr().out.strip() == f'pyg-degreembed {__version__}'
    assert main(['predict', '--checkpoint', checkpoint, '--head', 'e1',
                 '--relation', 'inv_r1', '--show-known']) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'query: ? r1 e1'
    # An index: #N (the entity's name is said).
    assert main(['predict', '--checkpoint', checkpoint, '--head', '#0',
                 '--relation', 'r1']) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "entity #0: index 0, named 'e0'"
    assert out[1] == 'query: e0 r1 ?'
    with pytest.raises(SystemExit):
        main(['predict', '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'a checkpoint written by train (required)' in text
    assert 'head entity: a name, or #index (required)' in text


def test_max_memory_sizes_the_run_and_is_lifted_after_it(tmp_path, capsys):
    # Less than the process already holds: refused before any work, in one
    # line that says what needs how much; the limit ends with the command.
    from pyg_degreembed.training import budget
    code = main(['train', '--dataset', 'family', '--max-memory', '0.05',
                 '--checkpoint', str(tmp_path / 'run.pt'), '--no-progress'])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith('error: ')
    assert 'needs about' in err and '0 bytes is available' in err
    assert len(err.strip().splitlines()) == 1
    assert budget._memory_limit is None
    assert not (tmp_path / 'run.pt').exists()
    for bad in ('0', '-1', 'lots', 'inf'):
        with pytest.raises(SystemExit) as info:
            main(['train', '--max-memory', bad])
        assert info.value.code == 2
        assert 'expected a positive number of gigabytes' in \
            capsys.readouterr().err
