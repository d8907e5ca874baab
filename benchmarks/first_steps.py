"""The first optimisation steps: validation MRR against the number of steps
(not seconds), so that how fast a variant learns per step is measured apart
from what a step costs.

    python benchmarks/first_steps.py --dataset fb15k-237 --num-steps 3 \
        --steps 40 --every 10

Each variant is built from seed 0 and trained by fit() (batch 128, the
same shuffle), the validation sample ranked (filtered, both directions,
realistic ties) before the first step and every --every steps:
  drum               DRUM (rho = 1)
  degreembed         DegreEmbed with the defaults (the paper's rho: rows of
                     a softmax over the K edge types, summing to 1)
  frozen-rho         DegreEmbed with rho frozen at its initialisation
  mean-one-rho       DegreEmbed with rho times K (rows average 1, a uniform
                     rho is DRUM; variants.py's mean-one-rho)
  lrX                DegreEmbed with Adam learning rate X for the
                     controllers (the degree embedding at its own default)
Writes results/first_steps_<dataset>_L<L>.{json,md}.
"""
import argparse
import os

import torch
from torch_geometric import seed_everything
from variants import freeze, mean_one

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, compute_ranks, fit
from pyg_degreembed.data.kg import all_triples, split_triples
from pyg_degreembed.evaluation.ranks import TrueAnswers

from common import load_benchmark, machine, write_json, write_markdown

#: name: (model class, change to the built model, fit arguments).
VARIANTS = {
    'drum': (RuleReasoner, None, {}),
    'degreembed': (DegreEmbedReasoner, None, {}),
    'frozen-rho': (DegreEmbedReasoner, freeze, {}),
    'mean-one-rho': (DegreEmbedReasoner, mean_one, {}),
    'lr3e-3': (DegreEmbedReasoner, None, {'lr': 3e-3}),
    'lr1e-2': (DegreEmbedReasoner, None, {'lr': 1e-2}),
}


def curve(data, variant, num_steps, steps, every, sample, true_answers):
    cls, change, fit_kwargs = VARIANTS[variant]
    seed_everything(0)
    model = cls(data.num_relations, num_steps=num_steps)
    if change is not None:
        change(model)

    def mrr():
        return compute_ranks(model, data, sample,
                             true_answers=true_answers).metrics()['mrr']
    points = [[0, mrr()]]
    done = 0  # optimisation steps over all epochs

    def callback(epoch, step):
        nonlocal done
        done += 1
        if done % every == 0:
            points.append([done, mrr()])
            print(f'{variant} step {done}: {points[-1][1]:.4f}', flush=True)
    fit(model, data, progress=False, callback=callback, max_steps=steps,
        adapt_threads=False, log=lambda line: None, **fit_kwargs)
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='fb15k-237')
    parser.add_argument('--num-steps', type=int, default=3)
    parser.add_argument('--steps', type=int, default=40)
    parser.add_argument('--every', type=int, default=10)
    parser.add_argument('--sample', type=int, default=300)
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS),
                        choices=list(VARIANTS))
    args = parser.parse_args()
    data = load_benchmark(args.dataset)
    valid = split_triples(data, 'valid')
    pick = torch.randperm(valid.size(1), generator=torch.Generator()
                          .manual_seed(0))[:args.sample]
    sample = valid[:, pick.sort().values]
    true_answers = TrueAnswers(all_triples(data), data.num_nodes,
                               data.num_relations)
    curves = {v: curve(data, v, args.num_steps, args.steps, args.every,
                       sample, true_answers) for v in args.variants}
    name = (f'first_steps_{os.path.basename(os.path.normpath(args.dataset))}'
            f'_L{args.num_steps}')
    write_json(f'{name}.json', {
        'dataset': args.dataset, 'num_steps': args.num_steps,
        'valid_sample_triples': pick.numel(), 'curves': curves,
        'machine': machine()})
    steps = [step for step, _ in curves[args.variants[0]]]
    lines = ['| variant | ' + ' | '.join(f'step {s}' for s in steps) + ' |',
             '|---' * (len(steps) + 1) + '|']
    lines += [f'| {v} | ' + ' | '.join(f'{m:.3f}' for _, m in points) + ' |'
              for v, points in curves.items()]
    lines += ['', f'Validation MRR (filtered, realistic ties) of '
              f'{pick.numel()} seeded validation triples, both directions, '
              f'after each number of optimisation steps (batch 128), L = '
              f'{args.num_steps}.']
    print(write_markdown(f'{name}.md', '\n'.join(lines), 'first_steps.py'))
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
