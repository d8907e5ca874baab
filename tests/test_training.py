import math

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import RuleReasoner, fit, rule_loss
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                model_from_checkpoint,
                                                save_checkpoint)

from conftest import chain_kg


def test_nll_and_bce_losses_by_hand():
    scores = torch.tensor([[0.5, 0.25, 0.0], [0.0, 0.0, 0.5]])
    target = torch.tensor([1, 0])
    nll = rule_loss(scores, target, 'nll', eps=1e-20)
    assert nll.item() == pytest.approx((-math.log(0.25) - math.log(1e-20))
                                       / 2, rel=1e-5)
    eps = 1e-7  # scores are clamped to [eps, 1 - eps]
    bce = rule_loss(scores, target, 'bce')
    row0 = -math.log(1 - 0.5) - math.log(0.25) - math.log(1 - eps)
    row1 = -math.log(eps) - math.log(1 - eps) - math.log(1 - 0.5)
    assert bce.item() == pytest.approx((row0 + row1) / 2, rel=1e-5)
    with pytest.raises(ValueError, match="'loss'"):
        rule_loss(scores, target, 'hinge')


def test_bce_gives_a_gradient_to_a_wrong_answer_with_a_high_score():
    # Rank T = 3: scores are sums of three distributions and reach 3. A
    # wrong answer at 1.6 must be pushed down, the answer at 0.9 up.
    scores = torch.tensor([[1.6, 0.9, 0.5]], requires_grad=True)
    loss = rule_loss(scores, torch.tensor([1]), 'bce', max_score=3.)
    grad, = torch.autograd.grad(loss, scores)
    # d/ds of -log(1 - s/3) is 1 / (3 - s); of -log(s/3) it is -1/s.
    assert grad[0, 0].item() == pytest.approx(1 / (3 - 1.6), rel=1e-5)
    assert grad[0, 1].item() == pytest.approx(-1 / 0.9, rel=1e-5)
    assert grad[0, 0] > 0 > grad[0, 1]


def test_fit_with_bce_scales_by_the_rank(monkeypatch):
    # fit() passes the model's rank as the largest score.
    import pyg_degreembed.training.loop as training
    seen = []

    def spy(scores, target, loss, eps, max_score=1.):
        seen.append((float(scores.detach().max()), max_score))
        return rule_loss(scores, target, loss, eps, max_score)

    monkeypatch.setattr(training, 'rule_loss', spy)
    seed_everything(0)
    model = RuleReasoner(3, rank=2, embedding_dim=8, hidden_channels=8)
    fit(model, chain_kg(), epochs=1, loss='bce', progress=False, log=None)
    assert seen and all(m == 2 and top <= 2 + 1e-5 for top, m in seen)


def test_fit_learns_a_composition_rule_and_restores_best_weights(device):
    data = chain_kg()
    seed_everything(0)
    model = RuleReasoner(3, num_steps=2, rank=1, embedding_dim=16,
                         hidden_channels=16)
    lines = []
    result = fit(model, data, epochs=30, batch_size=16, lr=0.05,
                 patience=30, progress=False, log=lines.append, device=device)
    assert next(model.parameters()).device.type == device.type
    # One log line per epoch (and a 'threads:' line if the thread guard
    # acts, as it does on a busy machine).
    assert len(result.history) == 30
    assert len([line for line in lines if line.startswith('epoch')]) == 30
    assert result.best_valid_mrr > 0.9
    assert result.history[0]['loss'] > result.history[-1]['loss']
    # The restored weights are those of the best epoch.
    from pyg_degreembed import evaluate
    mrr = evaluate(model, data, 'valid')['mrr']
    assert mrr == pytest.approx(result.best_valid_mrr)


def test_fit_is_deterministic_for_a_seed():
    data = chain_kg()
    losses = []
    for _ in range(2):
        seed_everything(3)
        model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
        # The thread guard off: it may change the thread count, and with it
        # the order of float sums (fit's docstring).
        result = fit(model, data, epochs=2, progress=False, log=None,
                     adapt_threads=False)
        losses.append([h['loss'] for h in result.history])
    assert losses[0] == losses[1]


def test_early_stopping():
    data = chain_kg()
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    result = fit(model, data, epochs=50, lr=1e-30, patience=2, progress=False,
                 log=None)
    # With lr = 1e-30 (below float32 resolution: no weight moves) nothing
    # improves after epoch 1.
    assert result.best_epoch == 1 and len(result.history) == 3


def test_edge_weight_learning_rate_applies_to_the_degree_embedding_only(
        tmp_path):
    from pyg_degreembed import DegreEmbedReasoner
    data = chain_kg()

    def train(edge_weight_lr, **kwargs):
        seed_everything(0)
        model = DegreEmbedReasoner(data.num_relations, embedding_dim=8,
                                   hidden_channels=4)
        before = {n: p.clone() for n, p in model.named_parameters()}
        fit(model, data, epochs=1, patience=1, edge_weight_lr=edge_weight_lr,
            progress=False, log=None, **kwargs)
        return {n: not torch.equal(before[n], p)
                for n, p in model.named_parameters()}, model

    moved, model = train(0.)  # a frozen degree embedding, in effect
    assert not any(v for n, v in moved.items() if n.startswith('edge_'))
    assert all(v for n, v in moved.items() if not n.startswith('edge_'))
    moved, _ = train(None)
    assert all(moved.values())
    path = tmp_path / 'run.pt'
    train(1e-4, checkpoint=str(path))
    payload = load_checkpoint(str(path))
    assert payload['fit']['edge_weight_lr'] == 1e-4
    groups = payload['state']['optimizer']['param_groups']
    assert [g['lr'] for g in groups] == [1e-3, 1e-4]
    with pytest.raises(ValueError, match="'edge_weight_lr' must be"):
        fit(model, data, edge_weight_lr=-1.)


def test_resume_with_other_settings_trains_with_them(tmp_path):
    # One parameter group (one learning rate, no decay) resumed with the
    # defaults (the degree embedding in a group of its own): the Adam
    # moments of every parameter carry over, the new settings apply.
    from pyg_degreembed import DegreEmbedReasoner
    data = chain_kg()
    seed_everything(0)
    model = DegreEmbedReasoner(data.num_relations, embedding_dim=8,
                               hidden_channels=4)
    path = str(tmp_path / 'run.pt')
    settings = dict(batch_size=16, progress=False, log=None,
                    checkpoint=path)
    fit(model, data, epochs=1, edge_weight_lr=None, edge_weight_decay=0.,
        **settings)
    steps = int(next(iter(load_checkpoint(path)['state']['optimizer']
                          ['state'].values()))['step'])
    with pytest.raises(ValueError, match='other settings'):
        fit(model, data, epochs=2, resume=True, **settings)
    fit(model, data, epochs=2, resume=True, allow_config_change=True,
        lr=3e-3, **settings)
    optimizer = load_checkpoint(path)['state']['optimizer']
    assert [(g['lr'], g['weight_decay']) for g in
            optimizer['param_groups']] == [(3e-3, 0), (1e-4, 0.1)]
    names = [n for n, _ in model.named_parameters()
             if not n.startswith('edge_weight.')] + \
        [n for n, _ in model.named_parameters()
         if n.startswith('edge_weight.')]
    shapes = dict((n, p.shape) for n, p in model.named_parameters())
    assert len(optimizer['state']) == len(names)
    for i, name in enumerate(names):
        assert int(optimizer['state'][i]['step']) == 2 * steps
        assert optimizer['state'][i]['exp_avg'].shape == shapes[name]


def test_edge_weight_decay_is_l2_on_the_degree_embedding_only(tmp_path):
    # Reference: no decay in the optimizer, the L2 gradient d * p added to
    # the degree embedding's gradients by hand (no clipping, so that the
    # order of clipping and decay does not matter).
    from pyg_degreembed import DegreEmbedReasoner
    data = chain_kg()

    def train(decay, by_hand=0., **kwargs):
        seed_everything(0)
        model = DegreEmbedReasoner(data.num_relations, embedding_dim=8,
                                   hidden_channels=4)
        for p in model.edge_weight.parameters():
            p.register_hook(lambda g, p=p: g + by_hand * p.detach())
        fit(model, data, epochs=2, patience=2, batch_size=16,
            clip_norm=None, edge_weight_decay=decay, progress=False,
            log=None, adapt_threads=False, **kwargs)
        return dict(model.named_parameters())

    path = tmp_path / 'run.pt'
    decayed = train(0.5, checkpoint=str(path))
    reference = train(0., by_hand=0.5)
    plain = train(0.)
    for name, p in decayed.items():
        assert torch.allclose(p, reference[name], atol=1e-6), name
        if name.startswith('edge_weight.'):
            assert not torch.allclose(p, plain[name], atol=1e-4), name
    payload = load_checkpoint(str(path))
    assert payload['fit']['edge_weight_decay'] == 0.5
    groups = payload['state']['optimizer']['param_groups']
    assert [g['weight_decay'] for g in groups] == [0, 0.5]
    with pytest.raises(ValueError, match="'edge_weight_decay' must be"):
        train(-1.)
    # A checkpoint written before the option existed was trained without.
    del payload['fit']['edge_weight_decay']
    save_checkpoint(str(path), payload)
    with pytest.raises(ValueError, match='edge_weight_decay 0.0 -> 0.5'):
        train(0.5, checkpoint=str(path), resume=True)


def _bounded_run(checkpoint, **kwargs):
    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    result = fit(model, chain_kg(), epochs=3, batch_size=16, log=None,
                 progress=False, checkpoint=checkpoint, adapt_threads=False,
                 **kwargs)
    return model, result


def test_max_steps_and_time_budget_end_cleanly_and_resume(tmp_path):
    # 80 training queries, batches of 16: 5 steps an epoch.
    after_epoch_1 = {}

    def remember(epoch, step):
        if (epoch, step) == (1, 5):
            after_epoch_1.update({k: v.clone() for k, v in
                                  model.state_dict().items()})

    seed_everything(0)
    model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
    full = fit(model, chain_kg(), epochs=3, batch_size=16, log=None,
               progress=False, adapt_threads=False, callback=remember)
    full_state = model.state_dict()

    # Stopped at step 2 of epoch 2: the best (only) epoch's weights.
    path = str(tmp_path / 'steps.pt')
    stopped, result = _bounded_run(path, max_steps=7)
    assert [h['epoch'] for h in result.history] == [1]
    assert all(torch.equal(stopped.state_dict()[k], after_epoch_1[k])
               for k in after_epoch_1)
    state = load_checkpoint(path)['state']
    assert state['global_step'] == 7 and state['partial']['step'] == 2
    # Resumed without a limit: as if it had never stopped.
    resumed, result = _bounded_run(path, resume=True)
    assert [h['valid_mrr'] for h in result.history] == \
        [h['valid_mrr'] for h in full.history]
    assert all(torch.equal(resumed.state_dict()[k], full_state[k])
               for k in full_state)

    # A budget spent before the first step: nothing trained, still
    # resumable to the same end.
    path = str(tmp_path / 'time.pt')
    _, result = _bounded_run(path, time_budget=1e-9)
    assert result.history == [] and result.best_epoch == 0
    assert load_checkpoint(path)['state']['partial']['step'] == 0
    resumed, _ = _bounded_run(path, resume=True)
    assert all(torch.equal(resumed.state_dict()[k], full_state[k])
               for k in full_state)

    # Stopped within epoch 1: the current weights are kept, and the
    # checkpoint's model (what evaluate, predict and load_model read) is
    # that one, not the untrained start.
    path = str(tmp_path / 'early.pt')
    stopped, result = _bounded_run(path, max_steps=3)
    assert result.best_epoch == 0
    kept = model_from_checkpoint(load_checkpoint(path)).state_dict()
    assert all(torch.equal(kept[k], v)
               for k, v in stopped.state_dict().items())
    seed_everything(0)
    start = RuleReasoner(3, embedding_dim=8, hidden_channels=8).state_dict()
    assert any(not torch.equal(kept[k], start[k]) for k in start)

    with pytest.raises(ValueError, match="'max_steps' must be a positive"):
        _bounded_run(None, max_steps=0)
    with pytest.raises(ValueError, match="'time_budget' must be a positive"):
        _bounded_run(None, time_budget=-1.)


def test_constructors_are_keyword_only_and_fit_returns_eval_mode():
    from pyg_degreembed import DegreEmbedReasoner
    for cls in (RuleReasoner, DegreEmbedReasoner):
        with pytest.raises(TypeError, match='positional'):
            cls(3, 3)  # num_steps? degree_dropout? Said by name.
    model = RuleReasoner(3, embedding_dim=4, hidden_channels=4).train()
    result = fit(model, chain_kg(), epochs=1, progress=False, log=None)
    assert not model.training and result.best_epoch == 1
    # No epoch completed: no validation MRR (nan, never -inf).
    with pytest.warns(UserWarning, match='before the first training step'):
        result = fit(RuleReasoner(3, embedding_dim=4, hidden_channels=4),
                     chain_kg(), progress=False, log=None, time_budget=1e-9)
    assert result.best_epoch == 0 and result.best_valid_mrr != \
        result.best_valid_mrr
