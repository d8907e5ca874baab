r"""Property-based fuzzing of the loaders and the command line: whatever the
bytes of a data file or the values of the declared options, the result is
success or a one-line error (exit 2), never a traceback.  Bounded: a few
dozen examples each, on a tiny KG."""
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyg_degreembed.cli import main
from pyg_degreembed.data.io import (KGFormatError, load_neural_lp,
                                    load_triples_file)

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
TRIPLE_LINE = st.lists(st.sampled_from(['a', 'b', 'r', 's', 'inv_r', '',
                                        ' ', 'é', '"x,y"']),
                       min_size=0, max_size=4).map('\t'.join)
CONTENT = st.one_of(
    st.binary(max_size=200),
    st.lists(TRIPLE_LINE, max_size=8).map(
        lambda lines: '\n'.join(lines).encode()),
    st.lists(TRIPLE_LINE, max_size=8).map(
        lambda lines: '\r\n'.join(lines).replace('\t', ',').encode()))


@FUZZ
@given(content=CONTENT, suffix=st.sampled_from(['.tsv', '.csv', '.txt']))
def test_triples_file_loader(tmp_path, content, suffix):
    path = tmp_path / f'kg{suffix}'
    path.write_bytes(content)
    try:
        data = load_triples_file(str(path))
    except KGFormatError as e:
        assert str(e).startswith(str(path))
        assert '\n' not in str(e)
        return
    assert data.train_edge_type.numel() > 0


@FUZZ
@given(content=CONTENT, file=st.sampled_from(
    ['entities.txt', 'relations.txt', 'facts.txt', 'train.txt', 'test.txt']))
def test_neural_lp_folder_loader(tmp_path, content, file):
    folder = tmp_path / 'kg'
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    base = {'entities.txt': 'a\nb\nc\n', 'relations.txt': 'r\ns\n',
            'facts.txt': 'a\tr\tb\n', 'train.txt': 'b\ts\tc\n',
            'valid.txt': 'a\ts\tc\n', 'test.txt': 'c\tr\ta\n'}
    for name, text in base.items():
        (folder / name).write_text(text)
    (folder / file).write_bytes(content)
    try:
        data = load_neural_lp(str(folder))
    except KGFormatError as e:
        # The fuzzed file is named, or, if it declares the names, a file
        # that uses one it no longer declares.
        named = {file}
        if file in ('entities.txt', 'relations.txt'):
            named |= {'facts.txt', 'train.txt', 'valid.txt', 'test.txt'}
        assert os.path.basename(e.path) in named, (e.path, file)
        assert str(e).startswith(e.path) and '\n' not in str(e)
        return
    # The files left alone read as written.
    for split, (h, r, t) in (('facts', ('a', 'r', 'b')),
                             ('train', ('b', 's', 'c')),
                             ('valid', ('a', 's', 'c')),
                             ('test', ('c', 'r', 'a'))):
        if file == f'{split}.txt':
            continue
        edges = data[f'{split}_edge_index']
        types = data[f'{split}_edge_type']
        assert [(data.entity_names[i], data.relation_names[k],
                 data.entity_names[j]) for (i, j), k in
                zip(edges.t().tolist(), types.tolist())] == [(h, r, t)]


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp('fuzz-cli')
    kg = folder / 'kg.tsv'
    kg.write_text(''.join(f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 30}\n'
                          for i in range(50)))
    checkpoint = str(folder / 'model.pt')
    assert main(['train', '--dataset', str(kg), '--dim', '4', '--epochs',
                 '1', '--checkpoint', checkpoint, '--no-progress']) == 0
    return folder, str(kg), checkpoint


INT = st.sampled_from([-3, -1, 0, 1, 2, 3])
FLOAT = st.sampled_from(['-1', '0', '1e-3', '0.5', 'inf', 'nan', '1e308'])
NAME = st.sampled_from(['e1', 'e7', 'nobody', 'r0', 'inv_r1', 'r9', '', 'x'])


@FUZZ
@given(data=st.data())
def test_command_line(workspace, capsys, data):
    folder, kg, checkpoint = workspace
    command = data.draw(st.sampled_from(['train', 'evaluate', 'predict',
                                         'rules', 'explain', 'saturation']))
    if command == 'train':
        argv = ['train', '--dataset', kg, '--no-progress', '--overwrite',
                '--checkpoint', str(folder / 'fuzz.pt'),
                '--epochs', str(data.draw(st.sampled_from([-1, 0, 1, 2]))),
                '--dim', str(data.draw(INT)), '--steps',
                str(data.draw(INT)), '--rank', str(data.draw(INT)),
                '--batch-size', str(data.draw(INT)), '--lr',
                data.draw(FLOAT), '--patience', str(data.draw(INT)),
                '--model', data.draw(st.sampled_from(['degreembed', 'drum',
                                                      'neurallp'])),
                '--loss', data.draw(st.sampled_from(['nll', 'bce'])),
                '--max-steps', str(data.draw(INT)),
                '--time-budget', data.draw(FLOAT)]
    elif command == 'saturation':
        argv = ['saturation', '--dataset', kg, '--steps',
                str(data.draw(INT)), '--top', str(data.draw(INT)),
                '--relation', data.draw(NAME)]
    else:
        argv = [command, '--checkpoint', checkpoint]
        if command in ('predict', 'explain'):
            argv += ['--head', data.draw(NAME), '--relation',
                     data.draw(NAME)]
        if command == 'explain':
            argv += ['--tail', data.draw(NAME)]
        if command != 'evaluate':
            argv += ['--k', str(data.draw(INT))]
        if command == 'rules' and data.draw(st.booleans()):
            argv += ['--relation', data.draw(NAME)]
    code = main(argv)
    out = capsys.readouterr()
    assert code in (0, 2), (argv, out.err)
    if code == 2:
        assert out.err.startswith('error: '), (argv, out.err)
        assert len(out.err.strip().splitlines()) == 1, (argv, out.err)
    else:
        assert 'error' not in out.err, (argv, out.err)
    if invalid_numbers(argv):
        assert code == 2, (argv, out.out)


def invalid_numbers(argv) -> bool:
    # Options whose value is out of range whatever else is given.
    value = dict(zip(argv, argv[1:]))
    at_least = {'--epochs': 1, '--dim': 1, '--steps': 1, '--rank': 1,
                '--batch-size': 1, '--patience': 1, '--k': 0, '--top': 0,
                '--max-steps': 1}
    if any(int(value[o]) < m for o, m in at_least.items() if o in value):
        return True
    if value.get('--time-budget') in ('-1', '0', 'nan'):
        return True
    return '--lr' in value and value['--lr'] in ('-1', '0', 'inf', 'nan')


@FUZZ
@given(data=st.data())
def test_output_paths(workspace, capsys, tmp_path, data):
    # Whatever output path a command gets, an input is never replaced, nor
    # an existing file of another kind; anything else is written or refused
    # in one line.
    folder, kg, checkpoint = workspace
    text = tmp_path / 'notes.txt'
    text.write_text('notes\n')
    link = tmp_path / 'link'
    if not link.exists():
        link.symlink_to(kg)
    inputs = {kg: 'input', checkpoint: 'input', str(link): 'input',
              str(text): 'other kind', str(tmp_path / 'new.out'): 'new',
              str(tmp_path): 'folder'}
    path = data.draw(st.sampled_from(sorted(inputs)))
    command = data.draw(st.sampled_from(['train-json', 'train-checkpoint',
                                         'evaluate', 'rules', 'saturation',
                                         'plot', 'explain']))
    if command.startswith('train') and path == checkpoint:
        # Not an input of train: an existing checkpoint (a copy, --overwrite
        # replaces it) or a JSON file's wrong kind.
        path = str(tmp_path / 'copy.pt')
        with open(checkpoint, 'rb') as f, open(path, 'wb') as g:
            g.write(f.read())
        inputs[path] = 'checkpoint'
    before = {p: open(p, 'rb').read() for p in (kg, checkpoint, str(text))}
    if command.startswith('train'):
        own = str(tmp_path / 'fuzz.pt')
        argv = ['train', '--dataset', kg, '--dim', '4', '--epochs', '1',
                '--no-progress', '--overwrite', '--checkpoint',
                path if command == 'train-checkpoint' else own]
        if command == 'train-json':
            argv += ['--json', path]
    elif command == 'saturation':
        argv = ['saturation', '--dataset', kg, '--json', path]
    else:
        argv = [command, '--checkpoint', checkpoint]
        argv += {'evaluate': ['--json', path], 'rules': ['--json', path],
                 'plot': ['--out', path],
                 'explain': ['--head', 'e1', '--relation', 'r1', '--tail',
                             'e8', '--plot', path]}[command]
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, err)
    if code == 2:
        assert err.startswith('error: ') and \
            len(err.strip().splitlines()) == 1, (argv, err)
    if inputs[path] in ('input', 'other kind', 'folder') or \
            inputs[path] == 'checkpoint' and command == 'train-json':
        assert code == 2, argv
    assert before == {p: open(p, 'rb').read() for p in before}
