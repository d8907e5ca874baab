r"""Bad input, hostile use and shared machines: each case is a clear error
naming what is wrong (command line: exit 2, one line) or correct behaviour,
never silent loss or a wrong result (docs/input-validation.md)."""
import os
import pickle
import subprocess
import sys

import pytest
import torch
from torch_geometric.data import HeteroData

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, TypedGraph, fit,
                            from_edge_index, from_hetero_data, load_model)
from pyg_degreembed.cli import main
from pyg_degreembed.data.io import KGFormatError, load_triples_file, read_lines
from pyg_degreembed.training.checkpoint import (CheckpointError,
                                                load_checkpoint,
                                                save_checkpoint)
from pyg_degreembed.training.files import FileError, exclusive

from conftest import chain_kg, one_line_error, trained_toy, triples_file


# 1
def test_hetero_data_keeps_every_edge_index_next_to_split_keys():
    h = HeteroData()
    h['entity'].num_nodes = 4
    h['entity', 'r', 'entity'].edge_index = torch.tensor([[0, 1, 2],
                                                          [1, 2, 3]])
    h['entity', 's', 'entity'].edge_index = torch.tensor([[2, 3], [0, 1]])
    h['entity', 's', 'entity'].test_edge_index = torch.tensor([[1], [0]])
    kg = from_hetero_data(h)
    assert kg.train_edge_type.numel() == 5
    assert kg.test_edge_index.tolist() == [[1], [0]]
    assert kg.test_edge_type.tolist() == [1]
    # A store whose edge_index contradicts its facts/train keys is refused.
    h['entity', 's', 'entity'].train_edge_index = torch.tensor([[2], [0]])
    with pytest.raises(ValueError, match='not their union'):
        from_hetero_data(h)


# 2
def test_float_ids_are_refused_not_truncated():
    with pytest.raises(TypeError, match="'edge_type' must hold integer"):
        from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]),
                        torch.tensor([0.7, 1.9, 0.2]))
    with pytest.raises(TypeError, match="'edge_index' must hold integer"):
        from_edge_index(torch.tensor([[0., 1.5], [1., 2.]]),
                        torch.tensor([0, 1]))
    with pytest.raises(TypeError, match='must hold integer'):
        TypedGraph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([0., 1.]),
                   3, 2)
    h = HeteroData()
    h['entity'].num_nodes = 3
    h['entity', 'r', 'entity'].edge_index = torch.tensor([[0., 1.],
                                                          [1., 2.]])
    with pytest.raises(TypeError, match='must hold integer'):
        from_hetero_data(h)


# 3
def test_a_changed_triples_file_is_refused(tmp_path, capsys):
    path = triples_file(tmp_path / 'kg.tsv')
    checkpoint = str(tmp_path / 'm.pt')
    assert main(['train', '--dataset', path, '--dim', '4', '--epochs', '1',
                 '--checkpoint', checkpoint, '--no-progress']) == 0
    capsys.readouterr()
    with open(path, 'a') as f:
        f.write('e1\tr0\te39\n')  # one more line: another random split
    one_line_error(capsys, ['evaluate', '--checkpoint', checkpoint],
                   'trained on another KG')
    # Reasoning on it as another graph is allowed, said explicitly.
    assert main(['evaluate', '--checkpoint', checkpoint, '--graph',
                 path]) == 0
    with pytest.raises(CheckpointError, match='another KG'):
        load_model(checkpoint)
    model, data = load_model(checkpoint, graph=path)
    assert data.train_edge_type.numel() > 0


# 4
def test_checkpoints_are_never_overwritten_silently(tmp_path, capsys):
    path = triples_file(tmp_path / 'kg.tsv')
    checkpoint = str(tmp_path / 'ow.pt')
    base = ['train', '--dataset', path, '--dim', '4', '--no-progress',
            '--checkpoint', checkpoint]
    assert main(base + ['--epochs', '2']) == 0
    capsys.readouterr()
    one_line_error(capsys, base + ['--epochs', '1'], 'exists; add --resume')
    assert load_checkpoint(checkpoint)['state']['epoch'] == 2
    one_line_error(capsys, base + ['--epochs', '3', '--resume', '--lr',
                                   '0.01'], 'other settings (lr 0.001 -> 0.01')
    assert main(base + ['--epochs', '3', '--resume', '--lr', '0.01',
                        '--allow-config-change']) == 0
    assert main(base + ['--epochs', '1', '--overwrite']) == 0
    assert load_checkpoint(checkpoint)['state']['epoch'] == 1
    capsys.readouterr()
    # The metrics JSON never replaces the checkpoint.
    one_line_error(capsys, ['train', '--dataset', path, '--checkpoint',
                            str(tmp_path / 'm.json')],
                   'would overwrite the checkpoint')
    # Two writers: the second is refused while the first holds the lock.
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import time\n'
         'from pyg_degreembed.training.files import exclusive\n'
         f'with exclusive({checkpoint!r}):\n'
         '    print("held", flush=True)\n'
         '    time.sleep(60)\n'], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        one_line_error(capsys, base + ['--resume'],
                       f'another process (pid {holder.pid})')
    finally:
        holder.kill()  # no clean-up: the system releases its lock
        holder.wait()
        holder.stdout.close()
    # ... and the lock of a killed process is free again.
    assert main(base + ['--resume', '--epochs', '2']) == 0
    with exclusive(checkpoint):
        assert open(checkpoint + '.lock').read() == str(os.getpid())


# 5, 7, 8
@pytest.mark.parametrize('argv,message', [
    (['--epochs', '0'], "'epochs' must be a positive integer"),
    (['--epochs', '-5'], "'epochs' must be a positive integer"),
    (['--batch-size', '0'], "'batch_size' must be a positive integer"),
    (['--lr', 'inf'], "'lr' must be a finite number > 0"),
    (['--lr', 'nan'], "'lr' must be a finite number > 0"),
    (['--lr', '0'], "'lr' must be a finite number > 0"),
    (['--steps', '1000000'], "'num_steps' must be at most 10"),
    (['--rank', '10000000'], "'rank' must be at most 100"),
    (['--dim', '0'], "'embedding_dim' must be a positive integer"),
    (['--device', 'bogus'], "unknown device 'bogus'"),
    (['--patience', '0'], "'patience' must be a positive integer"),
])
def test_bad_training_options(tmp_path, capsys, argv, message):
    path = triples_file(tmp_path / 'kg.tsv')
    checkpoint = tmp_path / 'run.pt'
    one_line_error(capsys, ['train', '--dataset', path, '--checkpoint',
                            str(checkpoint)] + argv, message)
    assert not checkpoint.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason='has CUDA')
def test_cuda_without_cuda(tmp_path, capsys):
    one_line_error(capsys, ['train', '--device', 'cuda', '--checkpoint',
                            str(tmp_path / 'x.pt')], 'CUDA is not available')


def test_unwritable_paths_are_refused_before_training(tmp_path, capsys):
    (tmp_path / 'DIR').write_text('a file')
    one_line_error(capsys, ['train', '--checkpoint',
                            str(tmp_path / 'DIR' / 'run.pt')],
                   'is a file, not a folder')


@pytest.fixture(scope='module')
def small_checkpoint(tmp_path_factory):
    return trained_toy(tmp_path_factory.mktemp('reliability'))[1]


@pytest.mark.parametrize('argv,message', [
    (['explain', '--head', 'e1', '--relation', 'r1', '--tail', 'e8', '--k',
      '-1'], '--k must be at least 0'),
    (['rules', '--k', '-1'], '--k must be at least 0'),
    (['predict', '--head', 'e1', '--relation', 'r1', '--k', '-1'],
     '--k must be at least 0'),
    (['evaluate', '--json', '.'], 'is a folder'),
    (['evaluate', '--device', 'bogus'], "unknown device 'bogus'"),
])
def test_bad_options_of_checkpoint_commands(small_checkpoint, capsys, argv,
                                            message):
    one_line_error(capsys, argv[:1] + ['--checkpoint', small_checkpoint] +
                   argv[1:], message)


@pytest.mark.parametrize('argv', [['train', '--epochs', 'abc'],
                                  ['nosuchcommand'], ['rules'],
                                  ['train', '--model', 'transe']])
def test_bad_command_lines_are_one_line_errors(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith('error: pyg-degreembed') and \
        len(err.strip().splitlines()) == 1, err


def test_saturation_steps_zero(capsys):
    one_line_error(capsys, ['saturation', '--steps', '0'],
                   "'num_steps' must be at least 1")


def test_bad_checkpoint_files(tmp_path, capsys, small_checkpoint):
    payload = load_checkpoint(small_checkpoint)
    del payload['kg']
    broken = str(tmp_path / 'broken.pt')
    save_checkpoint(broken, payload)
    one_line_error(capsys, ['evaluate', '--checkpoint', broken],
                   'incomplete checkpoint (missing kg)')

    class Evil:
        def __reduce__(self):
            return (os.system, ('echo owned',))

    evil = tmp_path / 'evil.pt'
    torch.save({'format': 2, 'x': Evil()}, str(evil))
    err = one_line_error(capsys, ['rules', '--checkpoint', str(evil)],
                         'refused: the file holds Python objects')
    assert 'weights_only' not in err
    raw = tmp_path / 'raw.pt'  # a plain pickle, not written by torch.save
    raw.write_bytes(pickle.dumps({'format': 2, 'x': Evil()}))
    err = one_line_error(capsys, ['rules', '--checkpoint', str(raw)],
                         'refused: the file was not written by torch.save '
                         'with tensors and plain data only: a raw pickle')
    assert 'weights_only' not in err


def test_unreadable_and_unwritable_files(tmp_path, monkeypatch):
    path = triples_file(tmp_path / 'kg.tsv')
    real_open = open

    def denied(file, *args, **kwargs):
        if str(file) == path:
            raise PermissionError(13, 'Permission denied')
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr('builtins.open', denied)
    with pytest.raises(KGFormatError, match='cannot read the file '
                       r'\(Permission denied\)'):
        list(read_lines(path))
    monkeypatch.undo()

    # Disk full while saving: one clear error, the previous file kept.
    target = str(tmp_path / 'run.pt')
    save_checkpoint(target, {'format': 2, 'epoch': 1})

    def full(*args, **kwargs):
        raise RuntimeError('[enforce fail at inline_container.cc:626] . '
                           'unexpected pos 64 vs 0\nmore torch lines')

    monkeypatch.setattr(torch, 'save', full)
    with pytest.raises(FileError, match=r'could not be written '
                       r'\(\[enforce fail.*unexpected pos 64 vs 0\); the '
                       'previous file is kept'):
        save_checkpoint(target, {'format': 2, 'epoch': 2})
    monkeypatch.undo()
    assert torch.load(target)['epoch'] == 1
    assert [f for f in os.listdir(tmp_path) if f.endswith('.tmp')] == []


# 6, 9
def test_header_and_whitespace_separated_files(tmp_path):
    path = tmp_path / 'kg.txt'
    path.write_text('head\trelation\ttail\n' + ''.join(
        f'e{i}\tr{i % 2}\te{i + 1}\n' for i in range(30)))
    data = load_triples_file(str(path))
    assert 'relation' not in data.relation_names
    assert data.num_relations == 2 and data.num_nodes == 31
    spaced = tmp_path / 'spaced.txt'
    spaced.write_text('Subject Predicate Object\n' + ''.join(
        f'e{i} r{i % 2} e{i + 1}\n' for i in range(30)))
    assert load_triples_file(str(spaced)).num_nodes == 31
    bad = tmp_path / 'bad.txt'
    bad.write_text('a b c\nd e\n')
    with pytest.raises(KGFormatError, match='bad.txt:2: expected 3 fields '
                       'separated by whitespace'):
        load_triples_file(str(bad))


def test_temporaries_of_dead_writers_are_removed(tmp_path):
    target = tmp_path / 'run.pt'
    dead = subprocess.run([sys.executable, '-c',
                           'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f'.run.pt.{dead}.abc123.tmp'
    stale.write_bytes(b'x' * 1000)
    mine = tmp_path / f'.run.pt.{os.getpid()}.live.tmp'  # a live writer
    mine.write_bytes(b'y')
    save_checkpoint(str(target), {'format': 2})
    assert not stale.exists() and mine.exists()


# 10
def test_python_api_misuse_names_the_argument(toy_kg):
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    with pytest.raises(TypeError, match="'head' must hold integer"):
        model(toy_kg, torch.tensor([0.]), torch.tensor([0]))
    with pytest.raises(ValueError, match='must be vectors'):
        model(toy_kg, 0, 1)
    with pytest.raises(ValueError, match=r"'edge_index' must have shape "
                       r'\[2, E\], got \[3, 2\]'):
        model(torch.zeros(3, 2, dtype=torch.long), torch.tensor([0, 1]),
              [0], [0])
    with pytest.raises(ValueError, match=r"'edge_index' must have shape"):
        model(torch.tensor([0, 1]), torch.tensor([0, 1]), [0], [0])
    with pytest.raises(ValueError, match="'remove_tail' must have the "
                       'shape'):
        model(toy_kg, [0, 1], [0, 0], remove_tail=[1, 2, 3])
    with pytest.raises(ValueError, match='no node type'):
        h = HeteroData()
        h['entity', 'r', 'entity'].edge_index = torch.tensor([[0], [1]])
        from_hetero_data(h)
    h = HeteroData()
    h['entity'].num_nodes = 2
    h['entity', 'r', 'entity'].edge_attr = torch.ones(1, 2)
    with pytest.raises(ValueError, match="has no 'edge_index'"):
        from_hetero_data(h)
    empty = from_edge_index(torch.empty(2, 0, dtype=torch.long),
                            torch.empty(0, dtype=torch.long), num_nodes=3,
                            num_relations=2,
                            splits={'facts': torch.tensor([[0], [0], [1]])})
    with pytest.raises(ValueError, match='no training triples'):
        fit(DegreEmbedReasoner(2), empty, epochs=1, log=None)
    with pytest.raises(ValueError, match="'lr' must be"):
        fit(model, chain_kg(), lr=float('inf'), log=None)


# The lock race: the second of two runs started together is refused.
def _race_worker(argv, inside, release, result, paused):
    import pyg_degreembed.cli.train as cli
    if paused:  # hold the lock until the other run has tried
        load = cli.load_dataset

        def load_after_the_other(name):
            inside.set()
            assert release.wait(120)
            return load(name)
        cli.load_dataset = load_after_the_other
    else:
        assert inside.wait(120)
    with open(os.devnull, 'w') as quiet:
        sys.stdout = quiet
        result.value = main(argv)
    if not paused:
        release.set()


def test_two_runs_started_together_one_succeeds(tmp_path, capfd):
    import multiprocessing
    # spawn: a forked child of a process that ran torch's thread pool can
    # hang in it.
    context = multiprocessing.get_context('spawn')
    checkpoint = str(tmp_path / 'r.pt')
    base = ['train', '--dataset', triples_file(tmp_path / 'kg.tsv', n=300),
            '--steps', '2',
            '--scorer', 'model', '--max-steps', '2', '--dim', '4',
            '--checkpoint', checkpoint, '--no-progress']
    inside, release = context.Event(), context.Event()
    results = [context.Value('i', -1), context.Value('i', -1)]
    workers = [context.Process(target=_race_worker, args=(
        base + ['--seed', str(seed)], inside, release, results[i], i == 0))
        for i, seed in enumerate((1, 2))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert inside.is_set() and release.is_set()  # the runs did overlap
    assert [r.value for r in results] == [0, 2]
    assert 'another process' in capfd.readouterr().err
    assert load_checkpoint(checkpoint)['fit']['seed'] == 1
    # Once the first has finished, the second finds its checkpoint.
    assert main(base + ['--seed', '2']) == 2
    assert 'exists' in capfd.readouterr().err


def test_a_failed_save_is_reported_as_itself_and_the_lock_released(
        tmp_path, monkeypatch):
    # A folder made read-only during training: the lock file cannot be
    # removed either; the error is the save's, and the lock is free.
    from pyg_degreembed.training.files import atomic_write
    path = str(tmp_path / 'x.pt')
    remove = os.remove

    def refuse_lock_removal(name):
        if name.endswith('.lock'):
            raise PermissionError(13, 'Permission denied', name)
        remove(name)

    def disk_full(f):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(os, 'remove', refuse_lock_removal)
    with pytest.raises(FileError, match='No space left on device'):
        with exclusive(path):
            atomic_write(path, disk_full)
    monkeypatch.undo()
    assert os.path.exists(path + '.lock')  # left, but not held
    with exclusive(path):
        pass


@pytest.mark.parametrize('argv,message', [
    (['--lr', '1e308'], 'training diverged: the weights became infinite or '
     'NaN at step 1 of epoch 1'),
    (['--time-budget', '1e-300'], 'spent before the first training step'),
])
def test_degenerate_training_is_stopped_with_one_line(tmp_path, capsys, argv,
                                                      message):
    path = triples_file(tmp_path / 'kg.tsv', n=300)
    checkpoint = tmp_path / 'run.pt'
    one_line_error(capsys, ['train', '--dataset', path, '--checkpoint',
                            str(checkpoint), '--no-progress', '--dim', '4',
                            '--scorer', 'model'] + argv, message)
    assert not os.path.exists(str(checkpoint) + '.lock')
    if '--time-budget' in argv:  # saved, resumable, nothing lost
        payload = load_checkpoint(str(checkpoint))
        assert payload['state']['global_step'] == 0
        assert main(['train', '--dataset', path, '--checkpoint',
                     str(checkpoint), '--no-progress', '--dim', '4',
                     '--scorer', 'model', '--resume', '--epochs', '1']) == 0
        assert load_checkpoint(str(checkpoint))['state']['global_step'] > 0
    else:  # no checkpoint of diverged weights
        assert not checkpoint.exists()
