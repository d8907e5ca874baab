"""Rules of length 2 against length 3 on FB15k-237, on a sample of its
query relations (a length-3 epoch on all of them costs ~30x a length-2 one).

    python benchmarks/rule_length.py                   # DRUM, L = 2 then 3
    python benchmarks/rule_length.py --share 0.05 --steps 3
    python benchmarks/rule_length.py --table-only

The graph is FB15k-237's whole training graph (facts + train, inverses
added), unchanged.  The query relations are a random sample (seed
:obj:`--sample-seed`) of the relations with test triples, drawn until their
train triples reach :obj:`--share` of train.txt; train triples of the other
relations move to the facts (still edges, no longer queries), and valid and
test keep the sampled relations only.  Filtered ranks of (h, r, ?) and
(?, r, t) are filtered by the triples of relation r only, so they are those
the same model would get on the full dataset.

Per rule length: the model (DRUM by default) with the library's defaults
(T = 3, Adam 1e-3, batch 128, budget 40 epochs, patience 3, best weights on
validation), seed 0, checkpointed after every epoch under
:obj:`--checkpoint-dir` (rerun the command to resume).  Reported: test MRR
and Hits@k (realistic and optimistic ties), the share of test answers within
2 and 3 edges of their head, epochs and seconds.  Writes
results/rule_length/<dataset>-<model>-steps<L>.json and results/rule_length.md.
"""
import argparse
import glob
import json
import os

import torch
from inductive import reachable
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner
from pyg_degreembed.data.kg import SPLITS, kg_data, split_triples

from common import (RESULTS, fit_and_test, load_benchmark, metric_cells,
                    save_run, write_markdown)

MODELS = {'drum': ('DRUM', RuleReasoner),
          'degreembed': ('DegreEmbed', DegreEmbedReasoner)}
RUNS = os.path.join(RESULTS, 'rule_length')


def sample_relations(data, share: float, seed: int):
    r"""Relations with test triples in a seeded random order, taken until
    their train triples reach :obj:`share` of all train triples."""
    train = split_triples(data, 'train')[1]
    tested = split_triples(data, 'test')[1].unique()
    order = tested[torch.randperm(tested.numel(), generator=torch.Generator()
                                  .manual_seed(seed))]
    counts = torch.bincount(train, minlength=data.num_relations)
    chosen, total = [], 0
    for r in order.tolist():
        if total >= share * train.numel():
            break
        chosen.append(r)
        total += int(counts[r])
    return sorted(chosen)


def restricted(data, relations):
    r"""The KG with the same graph whose queries (train, valid, test) are
    those of :obj:`relations` only."""
    keep = torch.zeros(data.num_relations, dtype=torch.bool)
    keep[relations] = True
    splits = {s: split_triples(data, s) for s in SPLITS}
    train = splits['train']
    splits['facts'] = torch.cat([splits['facts'], train[:, ~keep[train[1]]]],
                                dim=1)
    for s in ('train', 'valid', 'test'):
        splits[s] = splits[s][:, keep[splits[s][1]]]
    return kg_data(data.num_nodes, data.num_relations, splits,
                   data.entity_names, data.relation_names)


def run(args, data, relations, within, num_steps: int):
    name = f'{args.dataset}-{args.model}-steps{num_steps}'
    seed_everything(0)
    model = MODELS[args.model][1](data.num_relations, num_steps=num_steps)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    info = fit_and_test(model, data, args.epochs, seed=0,
                        checkpoint=os.path.join(args.checkpoint_dir,
                                                f'rule_length-{name}-share'
                                                f'{args.share}.pt'),
                        resume=True)
    counts = {s: split_triples(data, s).size(1)
              for s in ('train', 'valid', 'test')}
    path = save_run(os.path.join('rule_length', f'{name}.json'),
                    {'dataset': args.dataset, 'model': args.model,
                     'num_steps': num_steps, 'share': args.share,
                     'sample_seed': args.sample_seed,
                     'relations': relations,
                     'triples': counts,
                     'test_within_hops': within}, info)
    print(f"L = {num_steps}: test MRR {info['test']['realistic']['mrr']:.3f}"
          f" -> {path}")


def table() -> str:
    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(
        RUNS, '*.json')))]
    lines = ['| KG | model | L | relations | train / valid / test triples | '
             'test answers within L edges | test MRR (realistic) | H@1 | '
             'H@3 | H@10 | MRR (optimistic) | epochs, best | s / epoch |',
             '|---' * 13 + '|']
    for r in runs:
        n = r['triples']
        lines.append(
            f"| {r['dataset']} | {MODELS[r['model']][0]} | {r['num_steps']} | "
            f"{len(r['relations'])} | {n['train']} / {n['valid']} / "
            f"{n['test']} | "
            f"{100 * r['test_within_hops'][str(r['num_steps'])]:.1f} % | "
            f"{metric_cells(r)} | {r['test']['optimistic']['mrr']:.3f} | "
            f"{r['epochs']}, {r['best_epoch']} | "
            f"{r['seconds_per_epoch']:.0f} |")
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='fb15k-237')
    parser.add_argument('--model', default='drum', choices=MODELS)
    parser.add_argument('--steps', type=int, nargs='+', default=[2, 3])
    parser.add_argument('--share', type=float, default=0.1,
                        help='share of the train triples to keep as queries')
    parser.add_argument('--sample-seed', type=int, default=0)
    parser.add_argument('--epochs', type=int, default=40)
    parser.add_argument('--checkpoint-dir', default=os.path.join(
        os.path.dirname(RESULTS), '..', 'runs', 'checkpoints'))
    parser.add_argument('--table-only', action='store_true')
    args = parser.parse_args()
    if not args.table_only:
        data = load_benchmark(args.dataset)
        relations = sample_relations(data, args.share, args.sample_seed)
        data = restricted(data, relations)
        within = reachable(data, 3)
        for num_steps in args.steps:
            run(args, data, relations, within, num_steps)
    text = table()
    write_markdown('rule_length.md', text, 'rule_length.py')
    print(text)


if __name__ == '__main__':
    main()
