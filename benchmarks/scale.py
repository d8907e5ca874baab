"""Cost that follows the work: time and peak memory per training batch on
synthetic KGs of growing size at a fixed average degree, frontier (sparse)
against dense propagation, and frontier propagation with the memory-lean
hops (RuleReasoner(recompute=True), mode "recompute").

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--batches 5]

A synthetic KG has N entities, 10 relations and 4 N random triples (average
out-degree 8 with inverses), so the 2-hop neighbourhood of a query has the
same expected size at every N.  Each (size, mode) runs in its own process so
that its peak RSS is its own.  One DegreEmbed training step (paper settings:
L = 2, T = 3, 128-d, batch 128, nll loss on the answers' scores) is timed
after one warm-up step.  Writes benchmarks/results/scale.json and scale.png.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from common import machine, peak_rss_gb, save_figure, write_json


def synthetic_kg(num_nodes: int, num_relations: int = 10,
                 triples_per_node: int = 4, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    E = triples_per_node * num_nodes
    src = torch.randint(0, num_nodes, (E, ), generator=gen)
    dst = torch.randint(0, num_nodes, (E, ), generator=gen)
    typ = torch.randint(0, num_relations, (E, ), generator=gen)
    return torch.stack([src, typ, dst])


def measure(num_nodes: int, mode: str, batches: int) -> dict:
    from pyg_degreembed import DegreEmbedReasoner
    from pyg_degreembed.training.loop import nll_loss
    torch.manual_seed(0)
    R = 10
    triples = synthetic_kg(num_nodes, R)
    # "recompute" is frontier propagation with the memory-lean hops.
    model = DegreEmbedReasoner(R, recompute=mode == 'recompute')
    start = time.perf_counter()
    # The prepared graph (inverse edges added), as model(...) would build
    # and cache it from edge_index / edge_type.
    graph = model.graph(triples[[0, 2]], triples[1], num_nodes)
    build = time.perf_counter() - start
    hop_mode = 'sparse' if mode == 'recompute' else mode
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    times, reached = [], []
    for step in range(batches + 1):
        index = torch.randint(0, triples.size(1), (128, ), generator=gen)
        h, q, t = triples[0, index], triples[1, index], triples[2, index]
        reached.append(graph.neighborhood(h, 2).numel())
        start = time.perf_counter()
        loss = nll_loss(model.score(graph, h, q, t, mode=hop_mode))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step > 0:  # the first step warms up
            times.append(time.perf_counter() - start)
    return {
        'num_nodes': num_nodes, 'num_edges': graph.num_edges, 'mode': mode,
        'graph_build_seconds': build,
        'seconds_per_batch': statistics.median(times),
        'all_seconds': times,
        'reached_entities_2_hops': statistics.mean(reached[1:]),
        'peak_rss_gb': peak_rss_gb(),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--sizes', type=int, nargs='+',
                        default=[10_000, 100_000, 1_000_000])
    parser.add_argument('--modes', nargs='+',
                        default=['sparse', 'recompute', 'dense'])
    parser.add_argument('--batches', type=int, default=5)
    parser.add_argument('--dense-max-nodes', type=int, default=100_000,
                        help='dense propagation holds [pairs, 384] floats: '
                        'above this size it would need tens of GB')
    parser.add_argument('--one', nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1],
                                 args.batches)))
        return
    rows = []
    for n in args.sizes:
        for mode in args.modes:
            if mode == 'dense' and n > args.dense_max_nodes:
                rows.append({'num_nodes': n, 'mode': mode,
                             'skipped': 'memory'})
                continue
            out = subprocess.run(
                [sys.executable, __file__, '--one', str(n), mode,
                 '--batches', str(args.batches)], capture_output=True,
                text=True)
            if out.returncode != 0:
                rows.append({'num_nodes': n, 'mode': mode,
                             'error': out.stderr.strip().splitlines()[-1]})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1])
    write_json('scale.json', {'machine': machine(), 'rows': rows})
    plot(rows)


def plot(rows):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for mode, marker in (('sparse', 'o'), ('recompute', '^'),
                         ('dense', 's')):
        got = [r for r in rows if r['mode'] == mode and 'seconds_per_batch'
               in r]
        if not got:
            continue
        n = [r['num_nodes'] for r in got]
        axes[0].plot(n, [r['seconds_per_batch'] for r in got], marker=marker,
                     label=mode)
        axes[1].plot(n, [r['peak_rss_gb'] for r in got], marker=marker,
                     label=mode)
    for ax, label in zip(axes, ('seconds per training batch',
                                'peak RSS (GB)')):
        ax.set_xscale('log')
        ax.set_xlabel('entities (average degree fixed)')
        ax.set_ylabel(label)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, 'scale.png')


if __name__ == '__main__':
    main()
