"""Rules through the real AnyBURL and back: what we export, AnyBURL applies;
what AnyBURL learns, we read; and the same rule set ranks alike in both.

    python benchmarks/anyburl_round_trip.py [--datasets umls kinship]
        [--steps 2] [--learn 10]

Per dataset (alone on the machine, one step after the other):

1. **ours -> AnyBURL.** ``AppliedRules.mine`` (rule length ``--steps``,
   constant rules included) is written with ``anyburl_lines(...,
   entity_names=...)``; AnyBURL 23-1's own ``Apply`` (top 100 candidates)
   and ``Eval`` rank the test triples with that file, with
   ``UNSEEN_NEGATIVE_EXAMPLES`` set to the rules' :math:`u`, so that both
   read a rule's confidence as :math:`c / (n + u)`.  Beside it, our
   ranking with the same rules (no tie-break model).
2. **file -> ours.** ``read_anyburl`` of that file: the path rules come back
   with the same keys and confidences as mined (checked), the constant
   rules are counted as skipped (``read_anyburl`` holds path rules only).
3. **AnyBURL -> ours.** AnyBURL learns for ``--learn`` seconds
   (``../shared/tools/anyburl/run.sh``, 2 threads); its cyclic path rules
   (the ones ``read_anyburl`` holds) are kept in a file of their own, which
   AnyBURL applies and we read and rank with (:math:`u = 5`, AnyBURL's
   default).  AnyBURL's MRR with all its rules is recorded too.

Both aggregate the same way (a candidate's best rule, ties by the next
best); AnyBURL's MRR counts an answer outside its top 100 as 0 and orders
equal candidates its own way, so ours is given under realistic and
optimistic ties.  Writes ``results/anyburl_round_trip.json``.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

from common import ANYBURL_DIR, SHARED, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks, read_anyburl
from pyg_degreembed.interpret.anyburl import anyburl_lines

JAR = os.path.join(ANYBURL_DIR, 'AnyBURL-23-1.jar')


def kg_files(name: str, work: str):
    # AnyBURL's three files: the graph (facts + train), valid, test.
    base = os.path.join(SHARED, name)
    train = os.path.join(work, 'train.txt')
    with open(train, 'w') as out:
        for part in ('facts.txt', 'train.txt'):
            if os.path.exists(os.path.join(base, part)):
                with open(os.path.join(base, part)) as f:
                    out.write(f.read())
    return train, os.path.join(base, 'valid.txt'), \
        os.path.join(base, 'test.txt')


def anyburl_apply(rules: str, files, work: str, unseen: float) -> dict:
    # AnyBURL's Apply (top 100) and Eval of the rule file `rules`.
    train, valid, test = files
    predictions = os.path.join(work, 'predictions.txt')
    apply = os.path.join(work, 'apply.properties')
    with open(apply, 'w') as f:
        f.write(f'PATH_TRAINING = {train}\nPATH_TEST = {test}\n'
                f'PATH_VALID = {valid}\nPATH_RULES = {rules}\n'
                f'PATH_OUTPUT = {predictions}\nTOP_K_OUTPUT = 100\n'
                f'WORKER_THREADS = 2\n'
                f'UNSEEN_NEGATIVE_EXAMPLES = {unseen:g}\n')
    evaluate = os.path.join(work, 'eval.properties')
    with open(evaluate, 'w') as f:
        f.write(f'PATH_TRAINING = {train}\nPATH_TEST = {test}\n'
                f'PATH_VALID = {valid}\nPATH_PREDICTIONS = {predictions}\n')
    start = time.perf_counter()
    subprocess.run(['java', '-Xmx12G', '-cp', JAR,
                    'de.unima.ki.anyburl.Apply', apply], cwd=work,
                   check=True, capture_output=True)
    seconds = time.perf_counter() - start
    out = subprocess.run(['java', '-Xmx12G', '-cp', JAR,
                          'de.unima.ki.anyburl.Eval', evaluate], cwd=work,
                         check=True, capture_output=True, text=True).stdout
    h1, h3, h10, mrr = map(float, out.strip().splitlines()[-1].split())
    return {'mrr': mrr, 'hits@1': h1, 'hits@10': h10,
            'apply_seconds': round(seconds, 1)}


def our_ranking(rules: AppliedRules, kg) -> dict:
    start = time.perf_counter()
    ranks = compute_ranks(rules, kg, 'test')
    seconds = time.perf_counter() - start
    out = {tie: round(ranks.metrics(tie)['mrr'], 4)
           for tie in ('realistic', 'optimistic')}
    return {'mrr': out, 'ranking_seconds': round(seconds, 1)}


def path_rules(rules: AppliedRules) -> dict:
    # {(relation, pattern): confidence} of the path rules.
    return {key: conf for key, conf in zip(rules.rule_key.tolist(),
                                           rules.confidence.tolist())}


def cyclic_lines(path: str, relation_names, out: str) -> int:
    # The lines of AnyBURL's rule file that read_anyburl holds (cyclic path
    # rules r(X,Y) <= ... over variables only), written to `out`.
    kept = []
    with open(path) as f:
        for line in f:
            rule = line.rstrip('\n').split('\t')[3]
            head, _, body = rule.partition(' <= ')
            if body and head.endswith('(X,Y)') and all(
                    arg[:1].isupper() and len(arg) == 1
                    for atom in body.split('), ')
                    for arg in atom.split('(', 1)[1].rstrip(')').split(',')):
                kept.append(line)
    with open(out, 'w') as f:
        f.writelines(kept)
    return len(kept)


def round_trip(name: str, steps: int, learn: int, work: str) -> dict:
    kg = load_benchmark(name)
    names = list(kg.relation_names)
    files = kg_files(name, work)
    row = {'dataset': name, 'num_steps': steps}

    # 1. ours -> AnyBURL
    start = time.perf_counter()
    unseen = 200.  # mine's default u
    mined = AppliedRules.mine(kg, num_steps=steps, unseen=unseen)
    row['mining_seconds'] = round(time.perf_counter() - start, 1)
    exported = os.path.join(work, 'ours.txt')
    lines = anyburl_lines(mined, names, entity_names=list(kg.entity_names))
    with open(exported, 'w') as f:
        f.writelines(line + '\n' for line in lines)
    constant = sum(1 for line in lines if '(X,Y)' not in line.split('\t')[3])
    row['ours_to_anyburl'] = {
        'lines': len(lines), 'constant_rule_lines': constant,
        'unseen': unseen,
        'anyburl': anyburl_apply(exported, files, work, unseen),
        'ours': our_ranking(mined, kg)}

    # 2. the file read back
    back = read_anyburl(exported, names, unseen=unseen)
    original, read = path_rules(mined), path_rules(back)
    same = original.keys() == read.keys() and all(
        abs(original[k] - read[k]) <= 1e-12 * max(1., original[k])
        for k in original)
    row['file_to_ours'] = {
        'path_rules_mined': len(original), 'path_rules_read': len(read),
        'skipped': back.skipped, 'same_keys_and_confidences': same}
    if not same:
        raise SystemExit(f'{name}: the rules read back differ from those '
                         'written')

    # 3. AnyBURL -> ours
    learned_dir = os.path.join(work, 'learned')
    out = subprocess.run(['bash', os.path.join(ANYBURL_DIR, 'run.sh'),
                          learned_dir, str(learn), *files],
                         check=True, capture_output=True, text=True).stdout
    every = json.loads(out.strip().splitlines()[-1])
    learned = os.path.join(learned_dir, 'rules', f'r-{learn}')
    cyclic = os.path.join(work, 'anyburl_cyclic.txt')
    kept = cyclic_lines(learned, names, cyclic)
    read = read_anyburl(cyclic, names, unseen=5.)
    row['anyburl_to_ours'] = {
        'learn_seconds': learn, 'rules_learned': every['rules'],
        'anyburl_all_rules_mrr': every['mrr'], 'cyclic_rules': kept,
        'read': int(read.rule_key.numel()), 'skipped': read.skipped,
        'anyburl': anyburl_apply(cyclic, files, work, 5.),
        'ours': our_ranking(read, kg)}
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+', default=['umls', 'kinship'])
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--learn', type=int, default=10)
    args = parser.parse_args()
    if not os.path.exists(JAR) or shutil.which('java') is None:
        print(f'skipped: AnyBURL ({JAR}) or java not found')
        return
    rows = []
    for name in args.datasets:
        if not os.path.isdir(os.path.join(SHARED, name)):
            print(f'skipped {name}: no folder in {SHARED}')
            continue
        with tempfile.TemporaryDirectory() as work:
            row = round_trip(name, args.steps, args.learn, work)
        print(json.dumps(row))
        rows.append(row)
    print(write_json('anyburl_round_trip.json',
                     {'rows': rows, 'machine': machine()}))


if __name__ == '__main__':
    main()
