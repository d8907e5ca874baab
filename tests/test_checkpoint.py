import json
import os
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

def kill(epoch, step):
    if (epoch, step) == (3, 2):  # mid-epoch, after 2 of 6 steps
        os.kill(os.getpid(), signal.SIGKILL)

result = fit(model, data, epochs=5, batch_size=16, lr=0.05, patience=10,
             progress=False, log=None, adapt_threads=False,
             checkpoint=None if mode == 'full' else checkpoint,
             resume=mode == 'resume', callback=kill if mode == 'kill' else None)
ranks = compute_ranks(model, data, 'test')
with open(out, 'w') as f:
    json.dump({{'history': [[h['loss'], h['valid_mrr']] for h in result.history],
               'test': ranks.ranks['realistic'].tolist(),
               'weights': [float(p.double().sum()) for p in model.parameters()]}}, f)
'''


def run(tmp_path, mode):
    script = tmp_path / 'runner.py'
    script.write_text(RUNNER.format(tests=os.path.dirname(__file__)))
    out = tmp_path / f'{mode}.json'
    proc = subprocess.run([sys.executable, str(script), mode,
                           str(tmp_path / 'run.pt'), str(out)],
                          capture_output=True, text=True, timeout=300)
    return proc, out


def test_kill_mid_epoch_then_resume_equals_uninterrupted_run(tmp_path):
    proc, out = run(tmp_path, 'kill')
    assert proc.returncode == -9 and not out.exists()
    # Epochs 1 and 2 were checkpointed; epoch 3 was cut short.
    payload = load_checkpoint(str(tmp_path / 'run.pt'))
    assert payload['state']['epoch'] == 2
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.tmp')]

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
    with pytest.raises(CheckpointError, match='not a readable checkpoint'):
        load_checkpoint(str(tmp_path / 'junk.pt'))
    save_checkpoint(str(tmp_path / 'other.pt'), {'format': 99})
    with pytest.raises(CheckpointError, match='not a pyg_degreembed'):
        load_checkpoint(str(tmp_path / 'other.pt'))
