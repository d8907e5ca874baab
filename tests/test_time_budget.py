import json
import time

import pytest
import torch

from pyg_degreembed import DegreEmbedReasoner, compute_ranks, load_dataset
from pyg_degreembed.cli import main
from pyg_degreembed.interpret.applied_rules import rule_counts
from pyg_degreembed.interpret.mining import exact_seconds, mine_counts
from pyg_degreembed.training import scorer, time_plan
from pyg_degreembed.training.scorer import (AGGREGATION_SETTINGS,
                                            MIN_CHOICE_TRIPLES, _rank_until,
                                            choose_scorer)
from pyg_degreembed.training.time_plan import TimePlan

from test_sampled_rules import star_kg


def test_time_plan_shares_what_is_left_after_the_setup():
    start = time.perf_counter() - 10.
    plan = TimePlan(100., start)
    mining = plan.mining_seconds()  # ends the set-up, about 10 s
    after = 100. - (plan.setup_end - start) - time_plan.SAVE_SECONDS
    assert mining == pytest.approx(time_plan.MINING_SHARE * after)
    assert plan.training_seconds() == pytest.approx(
        plan.left() - time_plan.CHOICE_SHARE * after, abs=0.01)
    assert plan.deadline() == pytest.approx(
        start + 100. - time_plan.SAVE_SECONDS)
    assert '100s for the whole run' in plan.describe('auto')
    unlimited = TimePlan(None)
    assert unlimited.mining_seconds() is None
    assert unlimited.training_seconds() is None
    assert unlimited.deadline() is None
    for bad in (0., -1., float('nan')):
        with pytest.raises(ValueError, match='positive number of seconds'):
            TimePlan(bad)


def test_mining_is_exact_where_it_fits_and_sampled_where_not():
    data = load_dataset('family')
    unlimited = mine_counts(data, 2, constants=False)
    assert unlimited.method == 'exact'
    exact = rule_counts(data, 2)
    for got, want in zip(unlimited.counts, exact):
        assert torch.equal(got, want)
    # Family at L = 3 is expected to take about 2 s: a 0.5 s limit samples.
    assert exact_seconds(data, 3) > 0.5
    start = time.perf_counter()
    limited = mine_counts(data, 3, time_limit=0.5)
    assert limited.method == 'sampled'
    assert time.perf_counter() - start < 8
    assert limited.constant_counts is not None
    # A graph whose enumeration is refused: sampled, or refused up front.
    star = star_kg(110_000)
    assert mine_counts(star, 3, time_limit=2., constants=False
                       ).method == 'sampled'
    with pytest.raises(ValueError, match='walks'):
        mine_counts(star, 3, miner='exact')


def test_the_choice_ranks_validation_triples_until_its_deadline():
    data = load_dataset('family')
    model = DegreEmbedReasoner(data.num_relations).eval()
    valid = torch.stack([data.valid_edge_index[0], data.valid_edge_type,
                         data.valid_edge_index[1]])
    # No deadline: every triple, as compute_ranks ranks them (a list of
    # the model's rankings: one).
    full, = _rank_until(model, data, valid, None)
    want = compute_ranks(model, data, 'valid')
    assert torch.equal(full.ranks['realistic'], want.ranks['realistic'])
    # A deadline passed: the first few triples, both directions, ranked as
    # compute_ranks ranks them alone.
    n = MIN_CHOICE_TRIPLES
    assert n < valid.size(1)
    part, = _rank_until(model, data, valid, time.perf_counter() - 1.)
    alone = compute_ranks(model, data, valid[:, :n])
    assert torch.equal(part.ranks['realistic'], alone.ranks['realistic'])
    # The choice: the first few of a seeded order (u, then the aggregation
    # on the same triples).
    choice = choose_scorer(model, data, 2, deadline=time.perf_counter() - 1.,
                           aggregations=AGGREGATION_SETTINGS['max-plus'] +
                           AGGREGATION_SETTINGS['combined'][:1])
    assert f'on {n} of {valid.size(1)} validation triples' in choice.reason
    assert all(r.relation.numel() == 2 * n for r in choice.valid_ranks +
               choice.aggregation_ranks)
    order = torch.randperm(valid.size(1),
                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(choice.valid_ranks[-1].ranks['realistic'],
                       compute_ranks(model, data, valid[:, order[:n]])
                       .ranks['realistic'])


def test_train_keeps_to_its_budget(tmp_path, capsys):
    checkpoint = tmp_path / 'run.pt'
    start = time.perf_counter()
    code = main(['train', '--dataset', 'kinship', '--time-budget', '12',
                 '--checkpoint', str(checkpoint), '--no-progress'])
    out = capsys.readouterr().out
    assert code == 0
    assert 'time budget 12s for the whole run' in out
    with open(tmp_path / 'run.json') as f:
        metrics = json.load(f)
    # The run up to the saved model within 1.1 x the budget (the test
    # ranking after it is timed apart).
    assert metrics['run_seconds'] <= 1.1 * 12
    assert metrics['time_budget'] == 12
    # The stages' wall times, in order, add up to the run's.
    stages = metrics['stage_seconds']
    assert list(stages) == ['set-up', 'mining', 'training', 'choice']
    assert sum(stages.values()) == pytest.approx(metrics['run_seconds'],
                                                 abs=0.05)
    assert stages['training'] > stages['mining']
    assert time.perf_counter() - start - metrics['ranking_seconds'] <= \
        1.1 * 12 + 5
    assert metrics['metrics']['realistic']['mrr'] > 0.3


def test_the_default_batch_is_halved_to_fit_the_memory(
        tmp_path, capsys, monkeypatch):
    # Memory for a batch of about 40 queries: the default 128 becomes 32,
    # said before mining; a resumed run keeps it; an explicit batch that
    # does not fit is refused before any work.
    from conftest import one_line_error, triples_file
    from pyg_degreembed.training import budget
    from pyg_degreembed.training.checkpoint import load_checkpoint
    kg = triples_file(tmp_path / 'kg.tsv', n=300)
    checkpoint = str(tmp_path / 'run.pt')
    argv = ['train', '--dataset', kg, '--dim', '4', '--epochs', '1',
            '--scorer', 'model', '--checkpoint', checkpoint, '--no-progress']

    def per_query_megabyte(model, graph, queries, batch_size):
        return lambda batch: 10**6 * batch

    monkeypatch.setattr(budget, 'training_estimate', per_query_megabyte)
    monkeypatch.setattr(budget, 'available_memory', lambda **_: 40 * 10**6)
    assert main(argv) == 0
    assert 'batch size 32 (the default 128 does not fit the memory' in \
        capsys.readouterr().out
    assert load_checkpoint(checkpoint)['fit']['batch_size'] == 32
    assert main(argv[:6] + ['2'] + argv[7:] + ['--resume']) == 0
    assert load_checkpoint(checkpoint)['fit']['batch_size'] == 32
    one_line_error(capsys, argv + ['--batch-size', '64', '--overwrite'],
                   'Training with batch_size=64 and num_steps=')

    # Smaller batches that need more per query than the batch asked for
    # (2 MB per query below 128): halved until the estimate fits.
    def steeper(model, graph, queries, batch_size):
        return lambda batch: 10**6 * batch * (1 if batch == 128 else 2)

    monkeypatch.setattr(budget, 'training_estimate', steeper)
    assert main(argv + ['--overwrite']) == 0
    assert 'batch size 16 (the default 128' in capsys.readouterr().out

    # Mining leaves less memory than the batch was chosen with: probed
    # again after it, and halved.
    from pyg_degreembed.cli import train as train_command
    monkeypatch.setattr(budget, 'training_estimate', per_query_megabyte)
    real_mining = train_command.mine_counts

    def mining_takes_memory(*args, **kwargs):
        monkeypatch.setattr(budget, 'available_memory', lambda **_: 20 * 10**6)
        return real_mining(*args, **kwargs)

    monkeypatch.setattr(train_command, 'mine_counts', mining_takes_memory)
    monkeypatch.setattr(budget, 'available_memory', lambda **_: 40 * 10**6)
    mined = [a for a in argv if a not in ('--scorer', 'model')]
    assert main(mined + ['--overwrite']) == 0
    out = capsys.readouterr().out
    assert 'batch size 32 (the default 128' in out
    assert 'batch size 16 (after mining, 32 no longer fits the memory)' in out
    assert load_checkpoint(checkpoint)['fit']['batch_size'] == 16


def test_processes_on_one_machine_probe_their_share_of_its_memory(
        monkeypatch):
    # Under torchrun with 2 processes on one machine each takes every other
    # query of a batch: it probes its share (64 of 128) and sizes the batch
    # to its half of the memory (20 of 40 MB at 1 MB per query: a share of
    # 16 fits 0.9 x 20 MB); alone, it probes the whole batch against all
    # of it.
    from conftest import chain_kg
    from pyg_degreembed import RuleReasoner
    from pyg_degreembed.training import budget, distributed
    probes = []

    def per_query_megabyte(model, graph, queries, batch_size):
        probes.append(batch_size)
        return lambda batch: 10**6 * batch

    monkeypatch.setattr(budget, 'training_estimate', per_query_megabyte)

    def memory(megabytes):  # the system's, each process its share
        return lambda trimmed=False, sharers=1: megabytes * 10**6 // sharers

    monkeypatch.setattr(budget, 'available_memory', memory(40))
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2, embedding_dim=4,
                         hidden_channels=4)  # 4 kB of parameters
    assert budget.training_batch(model, data, 128, automatic=True) == 32
    assert probes == [128]
    probes.clear()
    monkeypatch.setattr(distributed, 'world', lambda: (2, 0))
    # (The turns and the minimum over processes: tests/test_distributed.py.)
    monkeypatch.setattr(distributed, 'one_at_a_time', lambda run: run())
    monkeypatch.setattr(distributed, 'all_reduce_number',
                        lambda value, reduction='sum': value)
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '2')
    assert budget.training_batch(model, data, 128, automatic=True) == 32
    assert probes == [64]
    # 30 MB: alone 16 (16 MB of 27); two processes 16 as well (8 MB each of
    # 13.5), each probing its share of 128; on two machines (one process
    # each), 32.
    monkeypatch.setattr(budget, 'available_memory', memory(30))
    probes.clear()
    assert budget.training_batch(model, data, 128, automatic=True) == 16
    assert probes == [64]
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '1')
    assert budget.training_batch(model, data, 128, automatic=True) == 32
    # An explicit batch that does not fit all the processes' shares is
    # refused, naming them.
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '2')
    with pytest.raises(budget.ResourceError, match='in 2 processes'):
        budget.training_batch(model, data, 64)


def test_a_choice_whose_second_stage_stops_early_compares_like_with_like(
        monkeypatch):
    # Stage 2 (the aggregations, here the longest rules kept) may stop
    # before stage 1's triples end; where it chooses other than the first
    # option, the choice per relation is made on its triples and the choice
    # for new graphs on stage 1's: each compares rankings of the same
    # queries (on FB15k-237 at 1800 s the two once met and the run failed).
    data = load_dataset('family')
    n = 300  # of Family's validation triples
    data.valid_edge_index = data.valid_edge_index[:, :n]
    data.valid_edge_type = data.valid_edge_type[:n]
    model = DegreEmbedReasoner(data.num_relations).eval()
    calls = []

    def second_stage_stops_at_half(model, data, triples, deadline,
                                   sample=None):
        calls.append(triples.size(1))
        if len(calls) == 2:
            triples = triples[:, :triples.size(1) // 2]
        return _rank_until(model, data, triples, None, sample)

    monkeypatch.setattr(scorer, '_rank_until', second_stage_stops_at_half)
    # Rules of one edge first: Family's rules of two edges win beyond noise.
    choice = choose_scorer(model, data, 2, max_lengths=[1, 2])
    assert calls == [n, n]
    assert choice.aggregation_ranks is not None
    assert all(r.relation.numel() == n for r in choice.aggregation_ranks)
    assert choice.valid_ranks[0].relation.numel() == 2 * n
    assert choice.applied.num_steps == 2  # the second option, not cut
    assert choice.new_graph is not None
    with pytest.raises(ValueError, match='rank the same queries'):
        scorer.relation_choice(choice.valid_ranks[:1] +
                               choice.aggregation_ranks[:1],
                               data.num_relations)


def test_the_sampled_miner_takes_the_time_the_constant_rules_leave(
        monkeypatch):
    # The sampled miner uses all the time it gets: the constant rules
    # come first, within their share, and it takes the rest of the limit;
    # the exact enumeration comes first and the constant rules take what
    # it leaves.
    from pyg_degreembed.interpret import mining
    data = load_dataset('family')
    calls = []
    real_constants, real_sampled = (mining.constant_rule_counts,
                                    mining.sample_rule_counts)

    def constants(data, time_limit, **kwargs):
        calls.append(('constants', time_limit))
        return real_constants(data, time_limit=time_limit, **kwargs)

    def sampled(data, num_steps, time_limit, **kwargs):
        calls.append(('sampled', time_limit))
        return real_sampled(data, num_steps, 0.05, **kwargs)

    monkeypatch.setattr(mining, 'constant_rule_counts', constants)
    monkeypatch.setattr(mining, 'sample_rule_counts', sampled)
    mine_counts(data, 2, time_limit=100., miner='sampled')
    (first, constant_limit), (second, path_limit) = calls
    assert (first, second) == ('constants', 'sampled')
    assert mining.CONSTANT_SHARE * 100. - 1. < constant_limit <= \
        mining.CONSTANT_SHARE * 100.
    # The constant rules of Family take well under a second of their 20:
    # the sampled miner gets more than the 80 s left after their share.
    assert 100. - 10. < path_limit <= 100.
    calls.clear()
    mined = mine_counts(data, 2, time_limit=100., miner='exact')
    (name, constant_limit), = calls
    assert name == 'constants' and mined.method == 'exact'
    assert constant_limit > (1 - mining.CONSTANT_SHARE) * 100.
