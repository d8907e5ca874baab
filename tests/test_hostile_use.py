r"""A hostile user: outputs aimed at inputs, runs that cannot be validated,
float ids, damaged checkpoints, planted dataset files, huge files and
options, concurrent writers, signals (docs/input-validation.md).  Each case
is a clear error before any work (command line: one line, exit 2) or a
stated, correct behaviour, never lost data or a silent wrong answer."""
import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tracemalloc

import pytest
import torch

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, evaluate, fit,
                            from_edge_index, predict)
from pyg_degreembed.cli import main
from pyg_degreembed.data.datasets import KGBenchmark, load_dataset
from pyg_degreembed.data.io import KGFormatError, load_triples_file, read_lines
from pyg_degreembed.data.kg import kg_data, split_triples
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.interpret.saturation import saturation
from pyg_degreembed.training import budget
from pyg_degreembed.training.checkpoint import (CheckpointError,
                                                load_checkpoint, save_json)
from pyg_degreembed.training.files import FileError, exclusive

from conftest import chain_kg, one_line_error, trained_toy, triples_file


def digest(path) -> str:
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp('hostile')
    return (folder, ) + trained_toy(folder)


# 1
def test_no_output_replaces_an_input(trained, capsys, tmp_path):
    folder, kg, checkpoint = trained
    before = {path: digest(path) for path in (kg, checkpoint)}
    link = tmp_path / 'link.json'
    link.symlink_to(kg)
    text = tmp_path / 'notes.txt'
    text.write_text('my notes\n')
    for argv in (
            ['evaluate', '--checkpoint', checkpoint, '--json', checkpoint],
            ['rules', '--checkpoint', checkpoint, '--json', checkpoint],
            ['evaluate', '--checkpoint', checkpoint, '--json', str(link)],
            ['train', '--dataset', kg, '--json', kg, '--checkpoint',
             str(tmp_path / 'a.pt')],
            ['saturation', '--dataset', kg, '--json', kg],
            ['train', '--dataset', kg, '--checkpoint', kg, '--overwrite'],
            ['plot', '--checkpoint', checkpoint, '--out', kg],
            ['explain', '--checkpoint', checkpoint, '--head', 'e1',
             '--relation', 'r1', '--tail', 'e8', '--plot', checkpoint]):
        one_line_error(capsys, argv, 'is an input of this command')
    # An existing file of another kind is not replaced either.
    for argv in (
            ['evaluate', '--checkpoint', checkpoint, '--json', str(text)],
            ['train', '--dataset', kg, '--checkpoint', str(text),
             '--overwrite'],
            ['plot', '--checkpoint', checkpoint, '--out', str(text)]):
        one_line_error(capsys, argv, 'exists and is not a')
    assert text.read_text() == 'my notes\n'
    assert {path: digest(path) for path in (kg, checkpoint)} == before
    # Files of the right kind are still replaced where asked.
    out = tmp_path / 'metrics.json'
    out.write_text('{}')
    assert main(['evaluate', '--checkpoint', checkpoint, '--json',
                 str(out)]) == 0
    assert 'metrics' in out.read_text()


def test_outputs_are_checked_before_the_work(trained, capsys, monkeypatch):
    folder, kg, checkpoint = trained

    def never(*args, **kwargs):
        raise AssertionError('the model was loaded before the check')

    monkeypatch.setattr('pyg_degreembed.cli.common.model_and_data', never)
    (folder / 'file').write_text('x')
    one_line_error(capsys, ['plot', '--checkpoint', checkpoint, '--out',
                            str(folder / 'file' / 'p.png')],
                   'is a file, not a folder')
    one_line_error(capsys, ['explain', '--checkpoint', checkpoint,
                            '--head', 'e1', '--relation', 'r1', '--tail',
                            'e8', '--plot', str(folder / 'file' / 'p.png')],
                   'is a file, not a folder')


def test_a_symbolic_link_checkpoint_updates_its_target(tmp_path, capsys):
    kg = triples_file(tmp_path / 'kg.tsv')
    target = tmp_path / 'store' / 'real.pt'
    target.parent.mkdir()
    link = tmp_path / 'run.pt'
    link.symlink_to(target)
    assert main(['train', '--dataset', kg, '--dim', '4', '--epochs', '1',
                 '--checkpoint', str(link), '--json',
                 str(tmp_path / 'm.json'), '--no-progress']) == 0
    assert link.is_symlink() and target.is_file()
    assert load_checkpoint(str(link))['state']['epoch'] == 1


# 2
def test_training_without_validation_keeps_the_last_weights():
    full = chain_kg()
    kg = from_edge_index(full.train_edge_index, full.train_edge_type,
                         num_nodes=full.num_nodes, num_relations=3,
                         splits={s: split_triples(full, s)
                                 for s in ('facts', 'test')})
    assert kg.valid_edge_type.numel() == 0
    torch.manual_seed(0)
    model = RuleReasoner(kg.num_relations, embedding_dim=8,
                         hidden_channels=8)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    last = {}

    def remember(epoch, step):
        last.update({k: v.clone() for k, v in model.state_dict().items()})

    lines = []
    with pytest.warns(UserWarning, match='no validation triples'):
        result = fit(model, kg, epochs=4, patience=1, log=lines.append,
                     progress=False, callback=remember)
    assert result.best_epoch == 4 and len(result.history) == 4
    assert result.best_valid_mrr != result.best_valid_mrr  # nan
    assert any('keeps the last weights' in line for line in lines)
    state = model.state_dict()
    assert all(torch.equal(state[k], last[k]) for k in state)
    assert not all(torch.equal(state[k], initial[k]) for k in state)


def test_command_line_without_validation_or_test(tmp_path, capsys):
    kg = tmp_path / 'two.tsv'
    kg.write_text('a\tr\tb\nb\tr\tc\n')  # facts 1, train 1, valid 0, test 0
    checkpoint = str(tmp_path / 'two.pt')
    assert main(['train', '--dataset', str(kg), '--dim', '4', '--epochs',
                 '2', '--checkpoint', checkpoint, '--no-progress']) == 0
    out = capsys.readouterr().out
    assert 'no valid triples: training runs all epochs' in out
    assert 'no test triples: no test metrics' in out
    assert 'no validation triples to choose on' in out
    assert load_checkpoint(checkpoint)['state']['best_epoch'] == 2
    assert not os.path.exists(str(tmp_path / 'two.json'))
    one_line_error(capsys, ['evaluate', '--checkpoint', checkpoint],
                   'split of')


def test_json_never_holds_nan(tmp_path):
    path = tmp_path / 'm.json'
    save_json(str(path), {'mrr': float('nan'), 'h': [float('inf'), 1.5]})
    assert path.read_text().split() == ['{', '"mrr":', 'null,', '"h":', '[',
                                        'null,', '1.5', ']', '}']


# 3
def test_float_and_bool_ids_in_splits_are_refused():
    edges, types = torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 0])
    for bad in (torch.tensor([[1.9], [0.], [3.9]]),
                torch.tensor([[True], [False], [True]])):
        with pytest.raises(TypeError, match="'test triples' must hold "
                           'integer ids'):
            from_edge_index(edges, types, splits={'test': bad})
        with pytest.raises(TypeError, match="'valid triples' must hold "
                           'integer ids'):
            kg_data(4, 1, {'train': torch.tensor([[0], [0], [1]]),
                           'valid': bad})


# 4
def test_damaged_checkpoint_bytes_are_detected(trained, tmp_path, capsys):
    folder, kg, checkpoint = trained
    payload = load_checkpoint(checkpoint)
    weights = max(payload['state']['best_model'].values(),
                  key=lambda t: t.numel())
    raw = bytearray(open(checkpoint, 'rb').read())
    at = raw.find(weights.numpy().tobytes()[:64])
    assert at > 0
    raw[at:at + 64] = bytes(64)
    damaged = tmp_path / 'damaged.pt'
    damaged.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match='damaged: its content does '
                       'not match the digest'):
        load_checkpoint(str(damaged))
    one_line_error(capsys, ['evaluate', '--checkpoint', str(damaged)],
                   'damaged')


# 5
def test_planted_processed_dataset_files_never_run(tmp_path):
    marker = tmp_path / 'owned'

    class Evil:
        def __reduce__(self):
            return (os.system, (f'touch {marker}',))

    root = tmp_path / 'root'
    KGBenchmark(str(root), 'family')
    processed = root / 'family' / 'processed'
    for name in ('data.pt', 'pre_transform.pt'):
        saved = (processed / name).read_bytes()
        torch.save((Evil(), None, None), str(processed / name))
        with pytest.raises(ValueError, match=f'{name}: refused: the file '
                           'holds Python objects .*; not a processed dataset '
                           'of this library'):
            KGBenchmark(str(root), 'family')
        assert not marker.exists()
        (processed / name).write_bytes(saved)
    assert KGBenchmark(str(root), 'family')[0].num_nodes == 3007


# 6
def test_readers_stream_and_stop_at_the_first_bad_line(tmp_path):
    path = tmp_path / 'big.tsv'
    with open(path, 'w') as f:
        f.write('a\tb\n' * 2_000_000)  # 8 MB, every line bad
    tracemalloc.start()
    with pytest.raises(KGFormatError, match=r'big.tsv:1: expected 3 fields'):
        load_triples_file(str(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1_000_000  # the file is 8 MB
    long_line = tmp_path / 'one.tsv'
    long_line.write_bytes(b'x' * 3_000_000)
    with pytest.raises(KGFormatError, match='one.tsv:1: line longer than'):
        list(read_lines(str(long_line)))


# 7
def test_options_beyond_the_machine_are_refused(tmp_path, capsys,
                                                monkeypatch):
    kg = triples_file(tmp_path / 'kg.tsv')
    monkeypatch.setattr(budget, 'available_memory', lambda **_: 2 * 10**9)
    err = one_line_error(capsys, ['train', '--dataset', kg, '--dim',
                                  '30000', '--checkpoint',
                                  str(tmp_path / 'a.pt')],
                         'A model with --dim 30000 and --rank 3 needs '
                         'about')
    assert 'TB of memory; 2.0 GB is available' in err
    monkeypatch.setattr(budget, 'available_memory', lambda **_: 10**6)
    one_line_error(capsys, ['train', '--dataset', kg, '--dim', '4',
                            '--batch-size', '128',
                            '--checkpoint', str(tmp_path / 'b.pt')],
                   'Training with batch_size=128 and num_steps=')
    assert not os.path.exists(tmp_path / 'b.pt')
    monkeypatch.undo()
    # Work: too many paths, pattern ids beyond 64 bits.
    one_line_error(capsys, ['saturation', '--dataset', 'family', '--steps',
                            '5'], 'walks, over the limit')
    one_line_error(capsys, ['saturation', '--dataset', kg, '--steps', '50'],
                   'too many patterns to number in 64 bits')
    with pytest.raises(ValueError, match='too many patterns'):
        saturation(load_dataset(kg), 40, inverse=True)


@pytest.mark.parametrize('measured', [True, False])
def test_memory_probes_keep_no_tensor(monkeypatch, measured):
    # No tensor outlives training_estimate, whether it measures a step's
    # peak or, where the system does not say, counts the saved tensors
    # (those the trie LSTM saves outlived it, with a pack hook that
    # returned them).
    import gc
    if not measured:
        monkeypatch.setattr(budget, 'resident_peak', lambda run: None)
    kg = load_dataset('family')
    model = DegreEmbedReasoner(kg.num_relations, num_steps=3)
    graph = model.graph(kg)
    queries = both_directions(split_triples(kg, 'train'), kg.num_relations)
    model.score(graph, *(q[:4] for q in queries))  # caches filled

    def live():
        gc.collect()
        return {id(o) for o in gc.get_objects() if isinstance(o, torch.Tensor)}

    before = live()
    estimate = budget.training_estimate(model, graph, queries, 8)
    assert estimate(8) > estimate(1) > 0
    assert live() <= before


@pytest.mark.parametrize('measured', [True, False])
def test_training_memory_estimate_covers_a_real_step(monkeypatch, measured):
    # The estimate lies above what a step keeps for its backward pass (the
    # first queries of the batch's size, where the probes draw theirs), and
    # within 4 times it, and grows with the batch and the rule length:
    # from a step's measured peak, or where the system does not say, from
    # the saved tensors, twice.
    if not measured:
        monkeypatch.setattr(budget, 'resident_peak', lambda run: None)
    kg = load_dataset('family')
    queries = both_directions(split_triples(kg, 'train'), kg.num_relations)
    sizes = {}
    for L in (2, 4):
        model = DegreEmbedReasoner(kg.num_relations, num_steps=L)
        graph = model.graph(kg)
        estimate = budget.training_estimate(model, graph, queries, 64)
        copies = budget.PARAMETER_COPIES * sum(
            p.numel() * p.element_size() for p in model.parameters())
        own = {p.untyped_storage().data_ptr() for p in model.parameters()}
        for batch in (16, 64):
            sizes[L, batch] = estimate(batch)
            # What a step of the batch saves, measured (storages once).
            saved = {}

            def pack(t):
                if t.untyped_storage().data_ptr() not in own:
                    saved[t.untyped_storage().data_ptr()] = \
                        t.untyped_storage()
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                model.score(graph, *(q[:batch] for q in queries))
            kept = sum(storage.nbytes() for storage in saved.values())
            assert copies + kept <= sizes[L, batch] <= \
                copies + 4 * kept, (L, batch)
        assert all(p.grad is None for p in model.parameters())
    assert sizes[2, 64] > sizes[2, 16] and sizes[4, 64] > sizes[2, 64]


@pytest.mark.parametrize('error', [MemoryError(), RuntimeError('boom\nx'),
                                   OverflowError('int too big')])
def test_the_command_line_never_prints_a_traceback(monkeypatch, capsys,
                                                   error):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr('pyg_degreembed.cli.analysis.load_dataset', fail)
    code = main(['saturation', '--dataset', 'family'])
    err = capsys.readouterr().err
    assert err.startswith('error: ') and len(err.strip().splitlines()) == 1
    if isinstance(error, MemoryError):
        assert code == 2 and 'out of memory' in err
    else:
        assert code == 1 and 'internal error' in err
        assert str(error).splitlines()[0] in err


# 8
def _contend(path, held, refused, first):
    # The first worker takes the lock and holds it until every other one
    # has tried (events, not sleeps: the overlap is certain).
    if first:
        with exclusive(path):
            held.set()
            assert refused.acquire(timeout=60)  # the other three, one by one
            assert refused.acquire(timeout=60)
            assert refused.acquire(timeout=60)
        return
    assert held.wait(60)
    try:
        with exclusive(path):
            raise SystemExit(3)  # taken while held: the test fails
    except FileError:
        refused.release()


def test_the_lock_is_taken_by_one_process_at_a_time(tmp_path):
    context = multiprocessing.get_context('fork')
    for trial in range(3):
        path = str(tmp_path / f'run{trial}.pt')
        held, refused = context.Event(), context.Semaphore(0)
        workers = [context.Process(target=_contend, args=(
            path, held, refused, i == 0)) for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert [w.exitcode for w in workers] == [0, 0, 0, 0]
        with exclusive(path):  # free again afterwards
            pass


# 9
def test_sigterm_ends_training_cleanly(tmp_path):
    kg = triples_file(tmp_path / 'kg.tsv', n=300)
    checkpoint = str(tmp_path / 'run.pt')
    run = subprocess.Popen(
        [sys.executable, '-m', 'pyg_degreembed.cli', 'train', '--dataset',
         kg, '--dim', '4', '--epochs', '100000', '--patience', '100000',
         '--scorer', 'model', '--checkpoint', checkpoint, '--no-progress'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in run.stdout:  # epoch 1 is saved before epoch 2 ends
            if line.startswith('epoch   2'):
                break
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 143, err
    assert err.startswith('error: stopped by SIGTERM at step ') and \
        f'{checkpoint} holds the run: resume it (--resume' in err and \
        len(err.strip().splitlines()) == 1, err
    state = load_checkpoint(checkpoint)['state']
    assert state['epoch'] >= 1 and state['partial'] is not None
    with exclusive(checkpoint):  # the lock was released
        pass
    assert main(['train', '--dataset', kg, '--dim', '4', '--epochs',
                 str(state['epoch'] + 1), '--patience', '100000', '--scorer',
                 'model', '--checkpoint', checkpoint, '--no-progress',
                 '--resume']) == 0
    assert load_checkpoint(checkpoint)['state']['epoch'] == \
        state['epoch'] + 1


def test_an_existing_path_comes_before_a_bundled_name(tmp_path, capsys,
                                                      monkeypatch):
    folder = tmp_path / 'family'
    folder.mkdir()
    for split, text in (('train', 'a\tr\tb\nb\tr\tc\nc\tr\td\n'),
                        ('valid', 'a\tr\tc\n'), ('test', 'b\tr\td\n')):
        (folder / f'{split}.txt').write_text(text)
    monkeypatch.chdir(tmp_path)
    assert load_dataset('family').num_nodes == 4
    assert main(['train', '--dataset', 'family', '--dim', '4', '--epochs',
                 '1', '--no-progress', '--checkpoint', 'f.pt']) == 0
    assert f'dataset: {folder} (a path that exists comes before the ' \
        'bundled family)' in capsys.readouterr().out


def test_names_are_read_alike_in_every_format(tmp_path):
    spaced = tmp_path / 'kg.tsv'
    spaced.write_text('Alice \tlikes\tBob\nBob\tlikes\tCarol\n')
    with pytest.raises(KGFormatError, match=r"kg.tsv:1: entity name "
                       r"'Alice ' has leading or trailing spaces"):
        load_triples_file(str(spaced))
    bom = tmp_path / 'bom.tsv'
    bom.write_bytes('a\tr\tb\n\ufeffb\tr\tc\n'.encode())
    with pytest.raises(KGFormatError, match='bom.tsv:2: byte-order mark'):
        load_triples_file(str(bom))
    csv = tmp_path / 'kg.csv'  # a space after a comma separates
    csv.write_text('a, r, b\nb, r, c\nc, r, d\nd, r, a\n')
    data = load_triples_file(str(csv))
    assert data.entity_names == ['a', 'b', 'c', 'd']
    assert data.relation_names == ['r']


def test_python_api_refuses_wrong_types():
    kg = chain_kg()
    with pytest.raises(ValueError, match="'num_relations' must be a "
                       'positive integer, got True'):
        DegreEmbedReasoner(True)
    model = RuleReasoner(kg.num_relations, embedding_dim=8,
                         hidden_channels=8)
    with pytest.raises(ValueError, match="'batch_size' must be a positive "
                       'integer, got True'):
        fit(model, kg, batch_size=True, log=None)
    with pytest.raises(ValueError, match="Unknown split 'bogus'"):
        evaluate(model, kg, 'bogus')
    with pytest.raises(TypeError, match="'k' must be a whole number, got "
                       '2.5'):
        predict(model, kg, 0, 0, k=2.5)
