import json
import os
import re
import subprocess
import sys

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, fit, from_edge_index
from pyg_degreembed.training.checkpoint import (CheckpointError,
                                                load_checkpoint,
                                                model_from_checkpoint,
                                                save_checkpoint)

from conftest import chain_kg

RUNNER = r'''
import json, os, signal, sys
sys.path.insert(0, {tests!r})
import torch
from torch_geometric import seed_everything
from conftest import chain_kg
from pyg_degreembed import DegreEmbedReasoner, fit
from pyg_degreembed import compute_ranks

mode, checkpoint, out = sys.argv[1:4]
data = chain_kg()
seed_everything(0)
model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)

# SIGKILL mid-epoch (after 2 of 5 steps); SIGTERM there, or in the last
# step of epoch 2 (it stops the validation that follows).
SIGNAL = {{'kill': (3, 2, signal.SIGKILL), 'term': (3, 2, signal.SIGTERM),
          'term-validation': (2, 5, signal.SIGTERM)}}

def kill(epoch, step):
    if (epoch, step) == SIGNAL[mode][:2]:
        os.kill(os.getpid(), SIGNAL[mode][2])

result = fit(model, data, epochs=5, batch_size=16, lr=0.05, patience=10,
             progress=False, log=None, adapt_threads=False,
             checkpoint=None if mode == 'full' else checkpoint,
             resume=mode == 'resume',
             callback=kill if mode in SIGNAL else None)
ranks = compute_ranks(model, data, 'test')
with open(out, 'w') as f:
    json.dump({{'history': [[h['loss'], h['valid_mrr']]
                            for h in result.history],
               'test': ranks.ranks['realistic'].tolist(),
               'weights': [float(p.double().sum())
                           for p in model.parameters()]}}, f)
'''


def run(tmp_path, mode):
    script = tmp_path / 'runner.py'
    script.write_text(RUNNER.format(tests=os.path.dirname(__file__)))
    out = tmp_path / f'{mode}.json'
    proc = subprocess.run([sys.executable, str(script), mode,
                           str(tmp_path / 'run.pt'), str(out)],
                          capture_output=True, text=True, timeout=300)
    return proc, out


@pytest.mark.parametrize('mode,epoch,partial', [
    ('kill', 2, None),  # epochs 1 and 2 saved; epoch 3 cut short, lost
    ('term', 2, 2),  # saved at step 2 of epoch 3
    ('term-validation', 1, 5),  # epoch 2 trained, its validation to come
])
def test_kill_mid_epoch_then_resume_equals_uninterrupted_run(
        tmp_path, mode, epoch, partial):
    proc, out = run(tmp_path, mode)
    assert proc.returncode != 0 and not out.exists()
    if mode != 'kill':
        assert 'TrainingInterrupted: stopped by SIGTERM at step ' \
            f'{partial} of epoch {epoch + 1}' in proc.stderr
    payload = load_checkpoint(str(tmp_path / 'run.pt'))
    assert payload['state']['epoch'] == epoch
    assert (payload['state']['partial'] or {}).get('step') == partial
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.tmp')]
    # A signal releases the lock (SIGKILL leaves its file, not held).
    assert os.path.exists(str(tmp_path / 'run.pt.lock')) == (mode == 'kill')

    proc, resumed = run(tmp_path, 'resume')
    assert proc.returncode == 0, proc.stderr
    proc, full = run(tmp_path, 'full')
    assert proc.returncode == 0, proc.stderr
    resumed, full = json.loads(resumed.read_text()), \
        json.loads(full.read_text())
    assert len(full['history']) == 5
    assert resumed == full  # bit for bit


def test_checkpoint_of_another_kg_is_refused(tmp_path):
    path = str(tmp_path / 'run.pt')
    seed_everything(0)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)
    fit(model, chain_kg(), epochs=1, progress=False, log=None,
        checkpoint=path)
    other = from_edge_index(torch.tensor([[0, 1], [1, 2]]),
                            torch.tensor([0, 4]), num_relations=5,
                            splits={'valid': torch.tensor([[0], [1], [2]])})
    model = DegreEmbedReasoner(5, embedding_dim=8, hidden_channels=8)
    with pytest.raises(CheckpointError, match='3 relations, but this KG '
                       'has 5'):
        fit(model, other, epochs=1, checkpoint=path, resume=True, log=None)


def test_checkpoint_round_trip_and_bad_files(tmp_path):
    path = str(tmp_path / 'run.pt')
    seed_everything(0)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)
    fit(model, chain_kg(), epochs=2, progress=False, log=None,
        checkpoint=path)
    payload = load_checkpoint(path)
    assert payload['kg']['num_relations'] == 3
    rebuilt = model_from_checkpoint(payload)
    for a, b in zip(rebuilt.state_dict().values(),
                    model.state_dict().values()):
        assert torch.equal(a, b)  # fit restored the best weights

    with pytest.raises(CheckpointError, match='not found'):
        load_checkpoint(str(tmp_path / 'missing.pt'))
    (tmp_path / 'junk.pt').write_bytes(b'not a checkpoint')
    with pytest.raises(CheckpointError,
                       match='not a pyg_degreembed checkpoint'):
        load_checkpoint(str(tmp_path / 'junk.pt'))
    save_checkpoint(str(tmp_path / 'other.pt'), {'format': 99})
    with pytest.raises(CheckpointError, match='not a pyg_degreembed'):
        load_checkpoint(str(tmp_path / 'other.pt'))


def test_the_digest_refuses_a_changed_byte(toy_run, tmp_path):
    path = str(tmp_path / 'run.pt')
    payload = torch.load(toy_run[1], weights_only=True)
    weight = payload['state']['best_model']['attention.weight']
    weight.view(-1)[0] += 1  # one weight changed, the digest kept
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match='damaged: its content does not '
                       'match the digest'):
        load_checkpoint(path)


@pytest.fixture(scope='module')
def toy_run(tmp_path_factory):
    from conftest import trained_toy
    return trained_toy(tmp_path_factory.mktemp('edited'))


def _edit(payload, field, value):
    # Sets payload[a][b]... for field 'a.b...' (value None: deletes it).
    *parents, last = field.split('.')
    for key in parents:
        payload = payload[key]
    payload[last] = value


@pytest.mark.parametrize('field,value,message', [
    ('model.config.rank', 10**7, "field model: 'rank' must be at most 100"),
    ('model.config.num_steps', 10**9, "'num_steps' must be at most 10"),
    ('model.config.embedding_dim', 10**6,
     "'embedding_dim' must be at most 65536"),
    ('model.edge_weight.config.embedding_dim', 10**7,
     "'embedding_dim' must be at most 65536"),
    ('model.config.hidden_channels', 9, 'field state.model.'),
    ('rules.config.num_steps', 10**8,
     "field rules.config: 'num_steps' must be at most 10"),
    ('rules.config.model_weight', 1.5,
     "field rules.config: 'model_weight' must be a number in [0, 1)"),
    ('model.config.num_relations', 4,
     'field model.config.num_relations: 4, but the KG it records has 3'),
    ('model.config.colour', 'red', "field model.config: unknown key "
     "'colour'"),
    ('extra', 1, "field checkpoint: unknown key 'extra'"),
    ('rules.relation', torch.tensor([7]),
     'field rules.relation: ids must be integers in [0, 6)'),
    ('rules.pattern', torch.tensor([7]), 'field rules.pattern: 1 values, '
     'the other columns have'),
    ('scorer', 'magic', "unknown scorer 'magic'"),
    ('new_graph', {'scorer': 'magic', 'unseen': 5.},
     "field new_graph.scorer: unknown scorer 'magic'"),
    ('new_graph', {'scorer': 'per-relation', 'unseen': 5.,
                   'model_relations': torch.ones(4, dtype=torch.bool)},
     'field new_graph.model_relations: expected a boolean tensor of shape '
     '[6]'),
    ('new_graph', {'scorer': 'rules', 'unseen': -1.},
     'field new_graph.unseen: expected a number >= 0, got -1.0'),
    ('new_graph', {'scorer': 'rules', 'unseen': 5., 'colour': 1},
     "field new_graph: unknown key 'colour'"),
    ('relation_settings', {'settings': [['max-plus', 3, 0., None]],
                           'index': torch.ones(6, dtype=torch.long)},
     'field relation_settings.index: expected a long tensor of shape [6] '
     'of indices into the 1 settings'),
    ('relation_settings', {'settings': [['magic', 3, 0., None]],
                           'index': torch.zeros(6, dtype=torch.long)},
     "field relation_settings.settings: not a list of aggregations: "
     "'aggregation' must be one of"),
])
def test_an_edited_checkpoint_is_refused_naming_the_field(
        toy_run, tmp_path, capsys, field, value, message):
    # Whoever edits the file can recompute the unkeyed digest: the contents
    # are checked before anything is built (one line, exit 2).
    from conftest import one_line_error
    kg, original = toy_run
    payload = load_checkpoint(original)
    _edit(payload, field, value)
    path = str(tmp_path / 'edited.pt')
    save_checkpoint(path, payload)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_checkpoint(path)
    for argv in (['predict', '--head', 'e1', '--relation', 'r1'],
                 ['rules'], ['evaluate']):
        one_line_error(capsys, argv[:1] + ['--checkpoint', path] + argv[1:],
                       message)


def test_a_model_beyond_the_memory_is_refused(toy_run, tmp_path,
                                              monkeypatch):
    from pyg_degreembed.training import budget
    payload = load_checkpoint(toy_run[1])
    payload['model']['config'].update(embedding_dim=60000,
                                      hidden_channels=60000)
    path = str(tmp_path / 'big.pt')
    save_checkpoint(path, payload)
    monkeypatch.setattr(budget, 'available_memory', lambda **_: 10**9)
    with pytest.raises(ValueError, match='the model the checkpoint describes '
                       'needs about'):
        load_checkpoint(path)


def test_a_checkpoint_without_digest_loads_with_a_warning(toy_run, tmp_path):
    payload = load_checkpoint(toy_run[1])
    payload['format'] = 2
    path = str(tmp_path / 'old.pt')
    torch.save(payload, path)  # format 2: no digest
    with pytest.warns(UserWarning, match='written without a digest'):
        assert load_checkpoint(path)['format'] == 2
    payload['state']['best_model']['attention.weight'] = torch.zeros(3)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match='attention.weight: \\[3\\] does '
                       'not fit'):
        load_checkpoint(path)
