"""Time to accuracy: validation MRR against wall-clock seconds from process
start, then the full filtered test metrics.

    python benchmarks/time_to_accuracy.py --dataset umls --model drum \
        --num-steps 2
    python benchmarks/time_to_accuracy.py --dataset fb15k-237 \
        --model default --time-budget 500
    python benchmarks/time_to_accuracy.py --table-only

The committed runs: for D in umls wn18rr fb15k-237, each of --model drum
and degreembed with --num-steps 2 and 3, and --model default, one process
each, one at a time: UMLS without a budget and --interval 5, WN18RR with
--time-budget 300 (the default 90: its rules rank, the model only breaks
ties) and --interval 30, FB15k-237 with --time-budget 500 and --interval 60
(where the default is DegreEmbed at L = 3 without rules, see the table, its
DegreEmbed L = 3 run is the default run).  --lr other than TrainConfig's
(1e-3) trains with that Adam learning rate: the run is then not the
default's, and its file and label name the rate.

--model degreembed / drum trains that model (L = --num-steps) and ranks with
it; --model default is `pyg-degreembed train`'s defaults: L from the data
(--steps auto), DegreEmbed, then the applied rules mined and chosen against
the model on validation (--scorer auto; where the rules are too many to
mine, the model ranks, as train says).  Training is fit()'s (early
stopping on the full validation set), ended after --time-budget seconds of
training if given.  Every --interval seconds of training the model ranks a
fixed, seeded sample of --sample validation triples (both directions,
filtered, realistic ties): the curve [[seconds, valid_mrr], ...], seconds
counted from process start (before torch is imported) and including the
sampling itself.  The last point is the scorer that is tested (the best
weights restored, the rules where they were chosen).  Then the full test
set: test_mrr_realistic and total_seconds (process start to test metrics).

Writes results/time_to_accuracy/<dataset>-<model>-L<L>.json; every run
regenerates results/time_to_accuracy.{md,png} from all run files, with
AnyBURL's points (release 23-1, 100 s of learning with 2 threads, learning +
applying seconds and test MRR as given in the project's accuracy issue).
Like the command line, it calls retain_freed_memory() first (recorded as
freed_memory_retained).  Run it alone on the machine: the clock is the
measurement.
"""
import time

START = time.perf_counter()  # noqa: E402 (before the heavy imports)

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
from torch_geometric import seed_everything  # noqa: E402

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner,  # noqa: E402
                            compute_ranks, fit, retain_freed_memory)
from pyg_degreembed.data.kg import all_triples, split_triples  # noqa: E402
from pyg_degreembed.evaluation.ranks import TrueAnswers  # noqa: E402
from pyg_degreembed.interpret.applied_rules import check_mining  # noqa
from pyg_degreembed.interpret.rule_length import (  # noqa: E402
    choose_rule_length)
from pyg_degreembed.training.config import TrainConfig  # noqa: E402
from pyg_degreembed.training.scorer import choose_scorer  # noqa: E402

from common import (RESULTS, chosen_length, figure,  # noqa: E402
                    load_benchmark, save_figure, save_run, test_metrics,
                    update_readme, write_markdown)

MODELS = {'degreembed': DegreEmbedReasoner, 'drum': RuleReasoner,
          'default': DegreEmbedReasoner}
FOLDER = os.path.join(RESULTS, 'time_to_accuracy')
DEFAULT_LR = TrainConfig().lr
#: AnyBURL-100s (2 threads): (learning + applying seconds, test MRR).
ANYBURL = {'umls': (106 + 24, 0.934), 'wn18rr': (104 + 57, 0.481),
           'fb15k-237': (108 + 407, 0.281)}


def seconds() -> float:
    return time.perf_counter() - START


class Curve:
    r"""Ranks the validation sample every :obj:`interval` seconds of
    training (called after every optimisation step)."""
    def __init__(self, model, data, sample, interval):
        self.model, self.data, self.sample = model, data, sample
        self.interval = interval
        self.true_answers = TrueAnswers(all_triples(data), data.num_nodes,
                                        data.num_relations)
        self.points, self.sampling_seconds, self.steps = [], 0., 0
        self.next = seconds() + interval

    def mrr(self, scorer) -> float:
        start = time.perf_counter()
        mrr = compute_ranks(scorer, self.data, self.sample,
                            true_answers=self.true_answers).metrics()['mrr']
        self.sampling_seconds += time.perf_counter() - start
        return mrr

    def point(self, scorer, step=None):
        mrr = self.mrr(scorer)
        self.points.append([round(seconds(), 2), mrr])
        print(f'{seconds():8.1f}s  {step}  valid sample MRR {mrr:.4f}',
              flush=True)

    def __call__(self, epoch, step):
        self.steps += 1
        if seconds() >= self.next:
            self.point(self.model, f'epoch {epoch} step {step}')
            self.next = seconds() + self.interval


def run(args):
    retained = retain_freed_memory()  # as the command line does
    data = load_benchmark(args.dataset)
    num_steps, shares, mine = args.num_steps, None, False
    if args.model == 'default':
        num_steps, shares = choose_rule_length(data)
        try:
            check_mining(data, num_steps)
            mine = True
        except ValueError as e:
            print(f'applied rules: not mined ({e}); the model ranks')
    seed_everything(args.seed)
    model = MODELS[args.model](data.num_relations, num_steps=num_steps)
    valid = split_triples(data, 'valid')
    pick = torch.randperm(valid.size(1), generator=torch.Generator()
                          .manual_seed(0))[:args.sample]
    curve = Curve(model, data, valid[:, pick.sort().values], args.interval)
    curve.point(model, 'start')
    train_start = seconds()
    result = fit(model, data, seed=args.seed, lr=args.lr, progress=False,
                 callback=curve, time_budget=args.time_budget)
    train_end = seconds()
    scorer, choice = model, None
    if mine:
        choice = choose_scorer(model, data, num_steps)
        scorer = choice.scorer
        print(f'scorer: {choice.name} ({choice.reason})')
    curve.point(scorer, 'end')
    test_start = seconds()
    ranks = compute_ranks(scorer, data, 'test', true_answers=curve.
                          true_answers)
    metrics = test_metrics(ranks)
    total = seconds()
    print(f'test MRR {metrics["realistic"]["mrr"]:.4f} after {total:.0f}s')
    rate = '' if args.lr == DEFAULT_LR else f'-lr{args.lr:g}'
    name = f'{args.dataset}-{args.model}-L{num_steps}{rate}.json'
    save_run(os.path.join('time_to_accuracy', name), {
        'dataset': args.dataset, 'model': args.model,
        'num_steps': num_steps, 'seed': args.seed,
        'time_budget': args.time_budget, 'interval': args.interval,
        'lr': args.lr,
        'valid_sample_triples': pick.numel(), 'device': 'cpu',
        'freed_memory_retained': retained}, {
        'curve': curve.points,
        'sampling_seconds': curve.sampling_seconds,
        'reach_shares': shares,
        'train_steps': curve.steps,
        'epochs': len(result.history), 'best_epoch': result.best_epoch,
        'best_valid_mrr': result.best_valid_mrr,
        'train_start_seconds': train_start,
        'train_end_seconds': train_end,
        'scorer': 'model' if choice is None else choice.name,
        'scorer_reason': None if choice is None else choice.reason,
        'mining_seconds': None if choice is None else choice.mining_seconds,
        'test_seconds': total - test_start,
        'total_seconds': total,
        'test_mrr_realistic': metrics['realistic']['mrr'],
        'test': metrics})


def load() -> list:
    return [json.load(open(path)) for path in
            sorted(glob.glob(os.path.join(FOLDER, '*.json')))]


def is_default(run) -> bool:
    r"""Whether :obj:`run` is the default at the rule length train chooses
    now (a default run at another length: what that length gave)."""
    return run['model'] == 'default' and \
        run.get('lr', DEFAULT_LR) == DEFAULT_LR and \
        run['num_steps'] == chosen_length(run['dataset'])


def label(run) -> str:
    name = {'degreembed': 'DegreEmbed', 'drum': 'DRUM',
            'default': 'default' if is_default(run) else
            'default scorer'}[run['model']]
    rate = run.get('lr', DEFAULT_LR)
    return f"{name} L={run['num_steps']}" + (
        '' if rate == DEFAULT_LR else f', lr {rate:g}')


def reached(run, fraction=0.95):
    r"""Seconds until the curve first reaches :obj:`fraction` of its
    best validation-sample MRR."""
    best = max(mrr for _, mrr in run['curve'])
    return next(s for s, mrr in run['curve'] if mrr >= fraction * best)


def table():
    runs = load()
    datasets = [d for d in ANYBURL if any(r['dataset'] == d for r in runs)]
    lines = ['| dataset | model | test MRR (realistic) | total seconds | '
             'training | mining and choice | test | seconds to 95 % of the '
             'best sampled valid MRR | epochs completed | training steps '
             '| scorer | freed memory retained |',
             '|---' * 12 + '|']
    fig, axes = figure(1, max(len(datasets), 1),
                       (4.5 * max(len(datasets), 1), 3.6))
    for ax, dataset in zip(axes[0], datasets):
        mine = [r for r in runs if r['dataset'] == dataset]
        for r in mine:
            train = r['train_end_seconds'] - r['train_start_seconds']
            choice = r['total_seconds'] - r['test_seconds'] - \
                r['train_end_seconds']
            lines.append(
                f"| {dataset} | {label(r)} | {r['test_mrr_realistic']:.3f} "
                f"| {r['total_seconds']:.0f} | {train:.0f} | {choice:.0f} "
                f"| {r['test_seconds']:.0f} | {reached(r):.0f} | "
                f"{r['epochs']} | {r.get('train_steps', '–')} | "
                f"{r['scorer']} | "
                f"{'yes' if r.get('freed_memory_retained') else 'no'} |")
            xs, ys = zip(*r['curve'])
            line, = ax.plot(xs, ys, label=label(r), linewidth=1)
            ax.plot([r['total_seconds']], [r['test_mrr_realistic']], 'o',
                    color=line.get_color())
        seconds_, mrr = ANYBURL[dataset]
        lines.append(f'| {dataset} | AnyBURL-100s (given) | {mrr:.3f} | '
                     f'{seconds_} | 100 | – | {seconds_ - 100} | – | – | '
                     '– | rules | – |')
        ax.plot([seconds_], [mrr], '*', color='black', markersize=10,
                label='AnyBURL-100s (given)')
        ax.set(title=dataset, xlabel='seconds from process start',
               ylabel='MRR', xscale='log')
        ax.legend(fontsize=6)
    lines += ['', 'Seconds from process start (total) and spent training, '
              'mining the rules and choosing the scorer on validation (the '
              'sampled validation curve included), and ranking the test '
              'set; training steps where the run counted them (the '
              'shared host\'s speed varies between days); whether the run '
              'kept freed memory for reuse (retain_freed_memory(), as the '
              'command line does; without it a FB15k-237 step page-faults '
              'its buffers in again). Figure: MRR on a '
              'fixed sample of '
              'validation triples during training (lines) and test MRR at '
              'the end (dots).']
    fig.tight_layout()
    print(save_figure(fig, 'time_to_accuracy.png'))
    write_markdown('time_to_accuracy.md', '\n'.join(lines),
                   'time_to_accuracy.py')
    update_readme('time-to-accuracy', '\n'.join(lines))
    update_readme('time-to-accuracy-headline', headline(runs, datasets))
    print('\n'.join(lines))


def headline(runs, datasets) -> str:
    r"""Per dataset: the default's test MRR and total seconds, the best
    run's, and AnyBURL's (given)."""
    lines = ['| dataset | default | best of the runs | AnyBURL-100s (given) |',
             '|---|---|---|---|']
    for dataset in datasets:
        mine = [r for r in runs if r['dataset'] == dataset]
        best = max(mine, key=lambda r: r['test_mrr_realistic'])
        default = [r for r in mine if is_default(r)]

        def cell(r):
            return (f"{r['test_mrr_realistic']:.3f} in "
                    f"{r['total_seconds']:.0f} s")
        seconds_, mrr = ANYBURL[dataset]
        lines.append(f"| {dataset} | "
                     f"{cell(default[0]) if default else '–'} | "
                     f'{cell(best)} ({label(best)}) | '
                     f'{mrr:.3f} in {seconds_} s |')
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', choices=list(ANYBURL))
    parser.add_argument('--model', choices=list(MODELS), default='default')
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--time-budget', type=float, default=None)
    parser.add_argument('--interval', type=float, default=30.)
    parser.add_argument('--sample', type=int, default=500)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--lr', type=float, default=DEFAULT_LR)
    parser.add_argument('--table-only', action='store_true')
    args = parser.parse_args()
    if not args.table_only:
        if args.dataset is None:
            parser.error('--dataset is required (or --table-only)')
        run(args)
    table()


if __name__ == '__main__':
    main()
