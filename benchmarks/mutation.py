"""Which small wrong changes of the library the test suite catches.

    python benchmarks/mutation.py             # every mutation
    python benchmarks/mutation.py --only evaluation

Each mutation replaces one piece of code of a core module (an exact
string, so the list fails loudly once the code moves) in a copy of the
package in a temporary folder, and runs the test files that cover that
module against the copy (PYTHONPATH first, so the copy is imported).  A
mutation is *caught* when those tests fail.  Not part of CI (a few minutes
per module).  Writes results/mutation.md and results/mutation.json.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from common import machine, write_json, write_markdown

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (module area, file under pyg_degreembed/, what the mutation does, code,
#  wrong code, test files)
MUTATIONS = [
    ('evaluation', 'evaluation/ranks.py', 'H@10(50) draws 50 negatives',
     'num_negatives: int = 49', 'num_negatives: int = 50',
     ['test_inductive.py', 'test_evaluation.py']),
    ('evaluation', 'evaluation/ranks.py', 'H@10(50) realistic as optimistic',
     'hit = torch.minimum(c + 1, k - b) / (c + 1)',
     'hit = torch.ones_like(b + c)',
     ['test_inductive.py', 'test_evaluation.py']),
    ('evaluation', 'evaluation/ranks.py', 'realistic rank = optimistic rank',
     "'realistic': (optimistic + pessimistic) / 2",
     "'realistic': optimistic",
     ['test_evaluation.py', 'test_properties.py', 'test_cli.py']),
    ('evaluation', 'evaluation/ranks.py', 'known answers not filtered',
     '        rows = torch.cat([rows, true_pairs[0]])\n'
     '        target = torch.cat([target, true_pairs[1]])\n',
     '        pass\n',
     ['test_evaluation.py', 'test_properties.py']),
    ('typed graph', 'data/typed_graph.py', 'dense hop counts duplicates once',
     '(N, pairs.numel()), check_invariants=False).coalesce()',
     '(N, pairs.numel()), check_invariants=False).coalesce()\n'
     '        coo = torch.sparse_coo_tensor(coo.indices(), '
     'torch.ones_like(coo.values()), coo.shape)',
     ['test_typed_graph.py', 'test_rule_reasoner.py']),
    ('typed graph', 'data/typed_graph.py', 'totals count duplicates once',
     'count = self.pair_count.to(y.dtype)',
     'count = self.pair_count.clamp(max=1).to(y.dtype)',
     ['test_typed_graph.py', 'test_rule_reasoner.py']),
    ('typed graph', 'data/typed_graph.py', 'left-out edges still travel',
     'value = torch.where(left_out, 0., value)',
     'value = value',
     ['test_typed_graph.py', 'test_rule_reasoner.py']),
    ('reasoner', 'nn/rule_reasoner.py', 'middle steps not normalised',
     '            x = x.normalize(self.eps)\n        return x, step',
     '            pass\n        return x, step',
     ['test_rule_reasoner.py']),
    ('reasoner', 'nn/rule_reasoner.py', 'rho read for the head only',
     'sources = graph.neighborhood(head, self.num_steps - 1)',
     'sources = graph.neighborhood(head, 0)',
     ['test_rule_reasoner.py', 'test_degree_embedding.py']),
    ('degree features', 'data/features.py', 'degree sets lose their last type',
     'padded[src, position] = typ',
     'padded[src, position] = torch.where(position > 0, typ, K)',
     ['test_features.py', 'test_degree_embedding.py']),
    ('explanations', 'interpret/explain.py', 'paths ignore rho',
     'w = w * rho[src[e], k]', 'w = w',
     ['test_explain.py']),
    ('grounded rules', 'interpret/rules.py', 'rule masses ignore rho',
     'model.num_relations, weight=rho)', 'model.num_relations)',
     ['test_grounded_rules.py', 'test_rules.py']),
    ('checkpoint', 'training/checkpoint.py', 'KG fingerprint not checked',
     'fingerprint != kg_fingerprint(data)', 'fingerprint is None',
     ['test_checkpoint.py', 'test_reliability.py']),
    ('CLI error paths', 'cli/__init__.py', 'errors exit 0',
     "        print(f'error: {e}', file=sys.stderr)\n        return 2",
     "        print(f'error: {e}', file=sys.stderr)\n        return 0",
     ['test_cli.py', 'test_fuzz.py']),
    ('CLI error paths', 'cli/__init__.py', 'Ctrl-C exits 0',
     'return 130', 'return 0', ['test_cli.py']),
    ('applied rules', 'interpret/applied_rules.py',
     'the head may answer itself',
     'found &= node != head[walk]', 'found &= node == node',
     ['test_applied_rules.py']),
    ('applied rules', 'interpret/applied_rules.py', 'worst rule first',
     'key = torch.sort(cell * V + (V - 1 - level)).values',
     'key = torch.sort(cell * V + level).values',
     ['test_applied_rules.py']),
    ('applied rules', 'interpret/applied_rules.py',
     'answer types see the own edge',
     'edges[rows, inverse] -= hi - lo', 'pass',
     ['test_applied_rules.py']),
    ('rule length', 'interpret/rule_length.py', 'reach not cumulative',
     'within = within[:, :measured].cummax(dim=0).values',
     'within = within[:, :measured]',
     ['test_rule_length.py']),
    ('rule length', 'interpret/rule_length.py', 'a gain of exactly 5 % '
     'does not lengthen', '>= min_gain:', '> min_gain:',
     ['test_rule_length.py']),
    ('prediction', 'evaluation/predict.py', 'inverse queries filter '
     'known answers head to tail',
     'asked, answer = (0, 2) if relation < R else (2, 0)',
     'asked, answer = (0, 2) if relation < R else (0, 2)',
     ['test_everyday.py']),
    ('constant rules', 'interpret/constant_rules.py', 'no constant rule '
     'kept', 'keep = (counts.support >= min_support) &',
     'keep = (counts.support < 0) &',
     ['test_constant_rules.py']),
    ('scorer choice', 'training/scorer.py', 'no per-relation choice',
     'return torch.where(count > 0, total.argmax(dim=0),',
     'return torch.where(count < 0, total.argmax(dim=0),',
     ['test_applied_rules.py']),
    ('files', 'training/files.py', 'the lock is shared',
     'fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)',
     'fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)',
     ['test_hostile_use.py', 'test_reliability.py']),
    ('CLI lock', 'cli/train.py',
     'train tests the checkpoint before the lock',
     'with exclusive(checkpoint) if process == 0 else nullcontext():',
     'with nullcontext():', ['test_reliability.py']),
    ('checkpoint', 'training/checkpoint.py', 'digest not checked',
     'if digest != payload_digest(payload):', 'if False:',
     ['test_checkpoint.py']),
    ('checkpoint', 'training/checkpoint.py', 'contents not checked',
     '    check_contents(payload, path)\n    if digest is None:',
     '    if digest is None:', ['test_checkpoint.py']),
    ('memory budget', 'training/budget.py', 'estimate halved',
     '2 * saved_by(probe) * batch_size // probe',
     'saved_by(probe) * batch_size // probe', ['test_hostile_use.py']),
    ('signals', 'training/loop.py', 'a signal ends fit as if done',
     '            if run.limit.signal is not None:\n'
     '                raise TrainingInterrupted(',
     '            if False:\n                raise TrainingInterrupted(',
     ['test_checkpoint.py', 'test_hostile_use.py']),
    ('signals', 'training/loop.py', 'a signal in validation is ignored',
     '                run.partial = run.last_pass', '                pass',
     ['test_checkpoint.py']),
    ('training', 'training/loop.py', 'diverged weights kept',
     'if not math.isfinite(float(sum(', 'if False and (float(sum(',
     ['test_reliability.py']),
    ('HeteroData', 'data/convert.py', 'node ids past their type accepted',
     'bad = ((ids < 0) | (ids >= n)).nonzero().view(-1)',
     'bad = (ids < 0).nonzero().view(-1)', ['test_typed_ranking.py']),
    ('rule files', 'interpret/anyburl.py', 'unreadable names exported',
     '    if bad is not None:\n        raise ValueError(f"relation name',
     '    if False:\n        raise ValueError(f"relation name',
     ['test_anyburl.py']),
    ('thread guard', 'training/threads.py', 'margin ignored',
     'choice = 1 if one * self.margin < full else self.initial',
     'choice = 1 if one < full else self.initial',
     ['test_threads.py']),
]


def run(mutation, work: str) -> dict:
    area, path, what, code, wrong, tests = mutation
    source = os.path.join(ROOT, 'pyg_degreembed', path)
    text = open(source).read()
    if text.count(code) != 1:
        raise SystemExit(f'{path}: the code of {what!r} is not there once; '
                         'update MUTATIONS')
    # The copy and its tests in `work`, which `python -m pytest` run there
    # puts first on sys.path (before an installed pyg_degreembed).
    for folder in ('pyg_degreembed', 'tests'):
        shutil.rmtree(os.path.join(work, folder), ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, folder),
                        os.path.join(work, folder),
                        ignore=shutil.ignore_patterns('__pycache__'))
    with open(os.path.join(work, 'pyg_degreembed', path), 'w') as f:
        f.write(text.replace(code, wrong))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-x', '-p',
         'no:cacheprovider'] + [os.path.join('tests', t) for t in tests],
        cwd=work, capture_output=True, text=True,
        env={**os.environ, 'PYTHONPATH': work})
    imported = subprocess.run(
        [sys.executable, '-c', 'import pyg_degreembed; '
         'print(pyg_degreembed.__file__)'], cwd=work, capture_output=True,
        text=True, env={**os.environ, 'PYTHONPATH': work}).stdout
    if not imported.startswith(work):
        raise SystemExit(f'the copy is not what the tests import: {imported}')
    last = (proc.stdout.strip().splitlines() or [''])[-1]
    return {'area': area, 'file': path, 'mutation': what, 'tests': tests,
            'caught': proc.returncode != 0, 'pytest': last,
            'seconds': time.perf_counter() - start}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--only', default=None, help='one module area')
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if args.only in (None, m[0])]
    with tempfile.TemporaryDirectory() as work:
        results = []
        for mutation in chosen:
            results.append(run(mutation, work))
            r = results[-1]
            print(f"{'caught' if r['caught'] else 'SURVIVED'}: {r['area']}: "
                  f"{r['mutation']} ({r['pytest']})", flush=True)
    caught = sum(r['caught'] for r in results)
    lines = [f'{caught} of {len(results)} mutations caught by the tests '
             'named (`python benchmarks/mutation.py`).', '',
             '| area | file | mutation | caught | tests run | pytest |',
             '|---|---|---|---|---|---|']
    lines += [f"| {r['area']} | {r['file']} | {r['mutation']} | "
              f"{'yes' if r['caught'] else '**no**'} | "
              f"{', '.join(r['tests'])} | {r['pytest']} |" for r in results]
    if args.only is None:
        write_markdown('mutation.md', '\n'.join(lines), 'mutation.py')
        write_json('mutation.json', {'results': results,
                                     'machine': machine()})
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
