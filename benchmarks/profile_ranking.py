"""Where the time of ranking goes: torch.profiler over one batch of test
queries (after a warm-up batch), the operators by their own CPU time.

    python benchmarks/profile_ranking.py \
        --dataset ../shared/datasets/fb15k-237 --num-steps 3

--model drum (the default) or degreembed, untrained (the cost does not
depend on the weights), --batch-size queries (256, as compute_ranks).
Writes results/profile_ranking_<dataset>_<model>_L<L>.txt.
"""
import argparse
import os

import torch
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, resolve_graph
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.training.files import atomic_write

from common import RESULTS, load_benchmark, machine

MODELS = {'drum': RuleReasoner, 'degreembed': DegreEmbedReasoner}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='umls')
    parser.add_argument('--model', choices=list(MODELS), default='drum')
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--batch-size', type=int, default=256)
    args = parser.parse_args()
    data = load_benchmark(args.dataset)
    graph = resolve_graph(data, num_relations=data.num_relations)
    seed_everything(0)
    model = MODELS[args.model](data.num_relations,
                               num_steps=args.num_steps).eval()
    h, q, _ = both_directions(split_triples(data, 'test'),
                              data.num_relations)
    pick = torch.randperm(h.numel(), generator=torch.Generator()
                          .manual_seed(0))[:2 * args.batch_size]
    warm, timed = pick.split(args.batch_size)
    with torch.no_grad():
        model(graph, h[warm], q[warm])
        with torch.profiler.profile() as prof:
            model(graph, h[timed], q[timed])
    table = prof.key_averages().table(sort_by='self_cpu_time_total',
                                      row_limit=15)
    name = os.path.basename(os.path.normpath(args.dataset))
    path = os.path.join(RESULTS, f'profile_ranking_{name}_{args.model}_'
                        f'L{args.num_steps}.txt')
    text = f'{machine()}\n\n{table}\n'
    atomic_write(path, lambda f: f.write(text), binary=False)
    print(table)
    print('wrote', path)


if __name__ == '__main__':
    main()
