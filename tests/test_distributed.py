import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch_geometric import seed_everything

from pyg_degreembed import (AppliedRules, DegreEmbedReasoner, compute_ranks,
                            fit)
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.training.scorer import MIN_CHOICE_TRIPLES, UnseenChoices

sys.path.insert(0, os.path.dirname(__file__))
from conftest import chain_kg  # noqa: E402


def train(out_dir, world_size=1):
    torch.set_num_threads(1)
    data = chain_kg()
    seed_everything(0)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)
    checkpoint = os.path.join(out_dir, f'run{world_size}.pt')
    fit(model, data, epochs=2, batch_size=13, lr=0.05, patience=5,
        progress=False, log=None, checkpoint=checkpoint)
    # Evaluate a model with the same weights in every setting.
    seed_everything(1)
    fixed = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)
    ranks = compute_ranks(fixed, data, 'test', batch_size=4)
    # Sampled candidates: each query's draw keyed by its global index.
    sampled = compute_ranks(fixed, data, 'test', batch_size=4,
                            num_candidates=3)
    # Several rankings at once, of one triple: the second process has none.
    rules = AppliedRules.mine(data, 2, unseen=5., tie_break=fixed)
    stacked = compute_ranks(UnseenChoices(rules, (5., 200.)), data,
                            split_triples(data, 'test')[:, :1])
    return model, (ranks, stacked, sampled)


def worker(process, world_size, out_dir):
    dist.init_process_group('gloo', init_method='file://' + os.path.join(
        out_dir, 'rendezvous'), rank=process, world_size=world_size)
    model, (ranks, stacked, sampled) = train(out_dir, world_size)
    torch.save({'state': model.state_dict(), 'ranks': ranks.ranks,
                'stacked': [r.ranks for r in stacked],
                'sampled': sampled.ranks},
               os.path.join(out_dir, f'process{process}.pt'))
    dist.destroy_process_group()


def test_two_processes_equal_one_process(tmp_path):
    out_dir = str(tmp_path)
    mp.spawn(worker, args=(2, out_dir), nprocs=2, join=True)
    single, (single_ranks, single_stacked, single_sampled) = train(out_dir)
    assert len(single_stacked) == 3
    results = [torch.load(os.path.join(out_dir, f'process{p}.pt'))
               for p in range(2)]
    for result in results:  # both processes hold the same model ...
        for key, value in single.state_dict().items():
            # ... equal to the single-process one up to float rounding:
            # the gradient sums run in another order, and Adam magnifies
            # differences in near-zero gradients (seen: 3e-5, while
            # training moves the weights by about 0.1).
            assert torch.allclose(result['state'][key], value, atol=1e-4)
        # The gathered evaluation equals the single-process one.
        for tie, value in single_ranks.ranks.items():
            assert torch.equal(result['ranks'][tie], value)
        for tie, value in single_sampled.ranks.items():
            assert torch.equal(result['sampled'][tie], value)
        for got, want in zip(result['stacked'], single_stacked):
            assert torch.equal(got['realistic'], want.ranks['realistic'])
        assert len(result['stacked']) == 3
    assert all(torch.equal(results[0]['state'][k], results[1]['state'][k])
               for k in results[0]['state'])
    # Only process 0 wrote the checkpoint (and the 1-process run its own).
    assert sorted(f for f in os.listdir(out_dir) if f.startswith('run')) \
        == ['run1.pt', 'run2.pt']


def mining_worker(process, world_size, out_dir):
    from test_applied_rules import random_kg
    from pyg_degreembed.interpret import sampled_rules
    dist.init_process_group('gloo', init_method='file://' + os.path.join(
        out_dir, 'mining'), rank=process, world_size=world_size)
    torch.set_num_threads(1)
    # What this process itself searches and scores.
    work = {}
    search, score = sampled_rules._candidates, sampled_rules._confidences

    def candidates(graph, triples, *args):
        work['searched'] = triples.size(1)
        return search(graph, triples, *args)

    def confidences(graph, queries, rules, *args):
        work['scored'] = rules.numel()
        return score(graph, queries, rules, *args)

    sampled_rules._candidates = candidates
    sampled_rules._confidences = confidences
    counts, report = sampled_rules.sample_rule_counts(
        random_kg(1, N=12, R=3, E=40), 3, num_samples=4000, seed=1)
    torch.save({'counts': tuple(counts), 'report': tuple(report),
                'work': work},
               os.path.join(out_dir, f'mined{process}.pt'))
    dist.destroy_process_group()


def test_two_processes_share_the_sampled_mining(tmp_path):
    # Each process searches half the triples and scores half the
    # candidates; both end with every rule. On a small graph with many
    # walks per rule the counts are exact, as with one process
    # (test_sampled_rules.test_full_search_finds_the_exact_rules).
    from test_applied_rules import random_kg
    from pyg_degreembed.interpret.applied_rules import rule_counts
    out_dir = str(tmp_path)
    mp.spawn(mining_worker, args=(2, out_dir), nprocs=2, join=True)
    exact = rule_counts(random_kg(1, N=12, R=3, E=40), 3)
    results = [torch.load(os.path.join(out_dir, f'mined{p}.pt'))
               for p in range(2)]
    for result in results:
        for got, want in zip(result['counts'], exact):
            assert torch.equal(got, want)
        searched, total, _, candidates, scored = result['report'][:5]
        assert searched == total and scored == candidates
    # Each did half the work.
    assert [r['work']['searched'] for r in results] == [
        (total + 1) // 2, total // 2]
    assert [r['work']['scored'] for r in results] == [
        (candidates + 1) // 2, candidates // 2]


def choice_worker(process, world_size, out_dir):
    import time

    import pyg_degreembed.training.scorer as scorer_module
    from pyg_degreembed import load_dataset
    from pyg_degreembed.training.scorer import choose_scorer
    dist.init_process_group('gloo', init_method='file://' + os.path.join(
        out_dir, 'choice'), rank=process, world_size=world_size)
    torch.set_num_threads(1)
    rank = scorer_module.compute_ranks

    def slow(*args, **kwargs):  # process 1 ranks at a slower pace
        time.sleep(0.3 * process)
        return rank(*args, **kwargs)

    scorer_module.compute_ranks = slow
    data = load_dataset('family')
    seed_everything(1)
    model = DegreEmbedReasoner(data.num_relations, embedding_dim=8,
                               hidden_channels=8)
    choice = choose_scorer(model, data, 2, deadline=time.perf_counter() + 6.,
                           unseen=(5., 200.), seed=0)
    torch.save([r.ranks['realistic'] for r in choice.valid_ranks],
               os.path.join(out_dir, f'choice{process}.pt'))
    dist.destroy_process_group()


def test_a_deadline_bound_choice_ranks_the_same_triples_in_each_process(
        tmp_path):
    # The parts of the validation triples ranked before the deadline follow
    # each process's pace; the processes take the smallest, so that the
    # gathered ranks stay whole (else: a size mismatch in the gather).
    out_dir = str(tmp_path)
    mp.spawn(choice_worker, args=(2, out_dir), nprocs=2, join=True)
    first, second = (torch.load(os.path.join(out_dir, f'choice{p}.pt'))
                     for p in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    # More than the first part, fewer than all 2,038 triples (both ways).
    assert 2 * MIN_CHOICE_TRIPLES < first[0].numel() < 2 * 2038


def batch_worker(process, world_size, out_dir):
    import time

    from pyg_degreembed import RuleReasoner
    from pyg_degreembed.training import budget
    dist.init_process_group('gloo', init_method='file://' + os.path.join(
        out_dir, 'batch'), rank=process, world_size=world_size)
    probes = []

    def probe(model, graph, queries, batch_size):  # 1 MB per query
        start = time.time()
        time.sleep(0.2)
        probes.append((start, time.time()))
        return lambda batch: 10**6 * batch

    budget.training_estimate = probe
    # Process 1 sees less memory free than process 0 (each its share).
    budget.available_memory = lambda trimmed=False, sharers=1: \
        (40 - 20 * process) * 10**6 // sharers
    data = chain_kg()
    model = RuleReasoner(3, num_steps=2, embedding_dim=4, hidden_channels=4)
    batch = budget.training_batch(model, data, 128, automatic=True)
    torch.save({'batch': batch, 'probes': probes},
               os.path.join(out_dir, f'batch{process}.pt'))
    dist.destroy_process_group()


def test_processes_probe_the_memory_in_turn_and_agree_on_the_batch(tmp_path):
    out_dir = str(tmp_path)
    mp.spawn(batch_worker, args=(2, out_dir), nprocs=2, join=True)
    first, second = (torch.load(os.path.join(out_dir, f'batch{p}.pt'))
                     for p in range(2))
    # Alone each would take 32 (40 MB) and 16 (20 MB): both take 16.
    assert first['batch'] == second['batch'] == 16
    # No two processes probed at once.
    assert all(a_end <= b_start or b_end <= a_start
               for a_start, a_end in first['probes']
               for b_start, b_end in second['probes'])
    assert len(first['probes']) == 1  # its share of 128
