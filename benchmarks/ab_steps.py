"""Time of one operation in two checkouts of the library, interleaved (A, B,
A, B, ...) so that drifts of a shared machine's speed hit both alike.

    git worktree add /tmp/before <commit>
    python benchmarks/ab_steps.py /tmp/before . [--dataset family] [--rounds 5]
    python benchmarks/ab_steps.py /tmp/before . --what mining --num-steps 3

--dataset takes a bundled name or a Neural-LP folder.

Each round runs, in a fresh process per checkout, through the public API of
that checkout:
* --what steps (the default): 3 warm-up and --batches timed training steps
  (DegreEmbed or --model drum, B --model-b if given: `ab_steps.py . .
  --model drum --model-b degreembed` compares the two models; paper
  settings, rule length --num-steps,
  batch 128, a graph object as the first argument) on --device (cpu, the
  default, or cuda), seconds per step;
* --what mining: AppliedRules.mine (path and answer-type rules of length
  <= --num-steps), seconds;
* --what rules-ranking: the filtered test ranks of those rules (no
  tie-break), seconds;
* --what model-ranking: the filtered test ranks of an untrained DegreEmbed
  (--model drum: DRUM) of rule length --num-steps, seconds; with
  --train-seconds S, of one trained for S seconds first (fit's defaults,
  once, in checkout B; both checkouts load its weights), whose attention
  has left the uniform start;
* --what reach-shares: reach_shares up to --num-steps edges (what
  --steps auto measures), seconds;
* --what choice: choose_scorer with an untrained DegreEmbed of rule length
  --num-steps (the rules mined, ranked on validation with each u, the
  model ranked, the choice), seconds.
Every process keeps freed memory for reuse (retain_freed_memory(), as the
command line does).  Prints the per-round times and the median ratio B / A;
writes benchmarks/results/ab_steps_<dataset>.json
(ab_steps_<dataset>_<model>_L<L> for other models or rule lengths;
ab_<what>_<dataset>_L<L> for the others, with _<model> for model-ranking;
then _<device> off the CPU; --tag TAG appends _TAG).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from common import machine, write_json

STEP = r'''
import sys, time
import torch
from torch_geometric import seed_everything
from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, TypedGraph
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.training.loop import nll_loss
data = load_dataset(sys.argv[1])
seed_everything(0)
cls = DegreEmbedReasoner if sys.argv[3] == 'degreembed' else RuleReasoner
device = torch.device(sys.argv[6])
model = cls(data.num_relations, num_steps=int(sys.argv[4])).to(device)
try:  # the graph as each version's users pass it
    model.graph
    graph = data
except AttributeError:
    graph = TypedGraph(data.edge_index, data.edge_type, data.num_nodes,
                       2 * data.num_relations)
h, q, t = (x.to(device) for x in both_directions(
    split_triples(data, 'train'), data.num_relations))
opt = torch.optim.Adam(model.parameters(), 1e-3)
sync = torch.cuda.synchronize if device.type == 'cuda' else lambda: None
batches = torch.randperm(
    h.numel(), generator=torch.Generator().manual_seed(0)).split(128)
def step(i):
    loss = nll_loss(model.score(graph, h[i], q[i], t[i]))
    opt.zero_grad(); loss.backward(); opt.step()
for i in batches[:3]:
    step(i)
sync()
start = time.perf_counter()
for i in batches[3:3 + int(sys.argv[2])]:
    step(i)
sync()
print((time.perf_counter() - start) / int(sys.argv[2]))
'''


RULES = r'''
import sys, time
from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.data.datasets import load_dataset
data = load_dataset(sys.argv[1])
start = time.perf_counter()
rules = AppliedRules.mine(data, int(sys.argv[4]), answer_types=True)
mined = time.perf_counter()
if sys.argv[5] == 'rules-ranking':
    compute_ranks(rules, data, 'test')
    print(time.perf_counter() - mined)
else:
    print(mined - start)
'''

MODEL_RANKING = r'''
import sys, time
from torch_geometric import seed_everything
from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, compute_ranks
from pyg_degreembed.data.datasets import load_dataset
data = load_dataset(sys.argv[1])
seed_everything(0)
cls = DegreEmbedReasoner if sys.argv[3] == 'degreembed' else RuleReasoner
model = cls(data.num_relations, num_steps=int(sys.argv[4]))
if sys.argv[7] != '-':
    import torch
    model.load_state_dict(torch.load(sys.argv[7], weights_only=True))
start = time.perf_counter()
compute_ranks(model, data, 'test')
print(time.perf_counter() - start)
'''
TRAIN = r'''
import sys, torch
from torch_geometric import seed_everything
from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, fit
from pyg_degreembed.data.datasets import load_dataset
data = load_dataset(sys.argv[1])
seed_everything(0)
cls = DegreEmbedReasoner if sys.argv[3] == 'degreembed' else RuleReasoner
model = cls(data.num_relations, num_steps=int(sys.argv[4]))
fit(model, data, seed=0, progress=False, time_budget=float(sys.argv[8]))
torch.save(model.state_dict(), sys.argv[7])
print(0.0)
'''
REACH = r'''
import sys, time
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.interpret.rule_length import reach_shares
data = load_dataset(sys.argv[1])
start = time.perf_counter()
reach_shares(data, max_steps=int(sys.argv[4]))
print(time.perf_counter() - start)
'''
CHOICE = r'''
import sys, time
from torch_geometric import seed_everything
from pyg_degreembed import DegreEmbedReasoner
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.training.scorer import choose_scorer
data = load_dataset(sys.argv[1])
seed_everything(0)
model = DegreEmbedReasoner(data.num_relations, num_steps=int(sys.argv[4]))
start = time.perf_counter()
choose_scorer(model, data, int(sys.argv[4]))
print(time.perf_counter() - start)
'''
CODE = {'steps': STEP, 'mining': RULES, 'rules-ranking': RULES,
        'model-ranking': MODEL_RANKING, 'reach-shares': REACH,
        'choice': CHOICE}


def run(checkout, args, model, code=None, extra=('-', )):
    # Run in the checkout: `python -c` puts the working directory first on
    # sys.path, ahead of PYTHONPATH, so that is where the package comes from.
    checkout = os.path.abspath(checkout)
    dataset = os.path.abspath(args.dataset) if os.path.exists(
        args.dataset) else args.dataset
    code = ('import pyg_degreembed; print(pyg_degreembed.__file__)\n'
            'pyg_degreembed.retain_freed_memory()\n') + \
        (code or CODE[args.what])
    out = subprocess.run([sys.executable, '-c', code, dataset,
                          str(args.batches), model,
                          str(args.num_steps), args.what, args.device,
                          *extra],
                         env=dict(os.environ, PYTHONPATH=checkout),
                         cwd=checkout, capture_output=True, text=True,
                         check=True)
    package, *_, seconds = out.stdout.split()
    if not package.startswith(checkout + os.sep):
        raise RuntimeError(f'{checkout}: the run imported {package}')
    return float(seconds)


def commit(checkout) -> str:
    try:
        out = subprocess.run(['git', '-C', checkout, 'rev-parse', 'HEAD'],
                             capture_output=True, text=True)
    except OSError:  # no git on this machine
        return 'unknown'
    return out.stdout.strip() or 'unknown'


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('a')
    parser.add_argument('b')
    parser.add_argument('--dataset', default='family')
    parser.add_argument('--batches', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--model', choices=['degreembed', 'drum'],
                        default='degreembed')
    parser.add_argument('--model-b', choices=['degreembed', 'drum'],
                        help='the model B runs (default: --model), to '
                        'compare two models in one checkout')
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--what', choices=list(CODE), default='steps')
    parser.add_argument('--device', default='cpu',
                        help='of --what steps: cpu, cuda, ...')
    parser.add_argument('--tag', default=None,
                        help='appended to the name of the result file')
    parser.add_argument('--train-seconds', type=float, default=None,
                        help='of --what model-ranking: rank with a model '
                        'trained this long (see above)')
    args = parser.parse_args()
    model_b = args.model_b or args.model
    weights = '-'
    if args.train_seconds is not None:
        if args.what != 'model-ranking' or model_b != args.model:
            parser.error('--train-seconds is for --what model-ranking of '
                         'one model')
        weights = os.path.join(tempfile.mkdtemp(), 'weights.pt')
        run(args.b, args, args.model, TRAIN,
            (weights, str(args.train_seconds)))
    rounds = []
    for r in range(args.rounds):
        a = run(args.a, args, args.model, extra=(weights, ))
        b = run(args.b, args, model_b, extra=(weights, ))
        rounds.append({'a': a, 'b': b, 'ratio': b / a})
        print(f'round {r + 1}: A {1e3 * a:.1f} ms  B {1e3 * b:.1f} ms  '
              f'B/A {b / a:.3f}', flush=True)
    median = statistics.median(x['ratio'] for x in rounds)
    print(f'median B/A {median:.3f}')
    name = os.path.basename(os.path.normpath(args.dataset))
    prefix = 'ab_steps'
    if args.what != 'steps':
        prefix = f'ab_{args.what}'
        name += f'_L{args.num_steps}'
        if args.what == 'model-ranking':
            name += f'_{args.model}'
    elif (args.model, args.num_steps) != ('degreembed', 2):
        name += f'_{args.model}_L{args.num_steps}'
    if model_b != args.model:
        name += f'_vs_{model_b}'
    if args.device != 'cpu':
        name += '_' + args.device.replace(':', '')
    if args.tag:
        name += f'_{args.tag}'
    write_json(f'{prefix}_{name}.json', {
        'a': os.path.abspath(args.a), 'b': os.path.abspath(args.b),
        'commits': [commit(args.a), commit(args.b)],
        'command': ' '.join(sys.argv),
        'what': args.what, 'dataset': args.dataset, 'model': args.model,
        'model_b': model_b, 'train_seconds': args.train_seconds,
        'num_steps': args.num_steps, 'device': args.device,
        'rounds': rounds, 'median_ratio': median,
        'machine': machine()})


if __name__ == '__main__':
    main()
