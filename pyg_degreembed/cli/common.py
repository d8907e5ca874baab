r"""What the commands of :mod:`pyg_degreembed.cli` share: the one-line
error, option types, the checkpoint options, loading a checkpoint and its
KG, names to ids, and the metrics report."""
import argparse
import inspect
import math
import time
from typing import Optional

import torch

from pyg_degreembed.data.datasets import dataset_path
from pyg_degreembed.evaluation.ranks import (SAMPLED, TIE_POLICIES,
                                             compute_ranks)
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.interpret.constant_rules import ConstantRule
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                model_and_data, save_json,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.files import check_output, input_files
from pyg_degreembed.training.graph_choice import (GRAPH_CHOICE_TRIPLES,
                                                  choose_on_graph)


class CLIError(Exception):
    r"""A user error reported as one line."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    r"""Shows defaults, and marks required options as required instead of
    showing a default they do not have."""
    def _get_help_string(self, action):
        if action.required:
            return f'{action.help} (required)'
        return super()._get_help_string(action)


def _command(sub, name: str, help: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help,
                          formatter_class=_HelpFormatter)


def _rate_or_none(text: str) -> Optional[float]:
    if text.lower() == 'none':
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or 'none', got {text!r}") from None


def _seconds_or_none(text: str) -> Optional[float]:
    if text.lower() == 'none':
        return None
    try:
        return float(text)  # checked by TimePlan (one line, exit 2)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds or 'none', got {text!r}") \
            from None


def _gigabytes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(
            f'expected a positive number of gigabytes, got {text!r}')
    return value


def _steps(text: str):
    if text == 'auto':
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'auto', got {text!r}") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f'expected a whole number of at least 1, got {text!r}')
    return value


def _eval_candidates_arg(p):
    p.add_argument('--eval-candidates', type=_positive_int, default=None,
                   metavar='N',
                   help='rank each answer against N of its filtered '
                   'candidates drawn at random (seeded, the same for every '
                   'model; the OGB protocol, for large KGs) instead of '
                   'against all entities (the rules scoring only those; '
                   'train chooses its scorer on validation ranked so too); '
                   'its metrics are labelled and not comparable with full '
                   'ranking (None: all)')


def _defaults(function) -> dict:
    return {name: p.default for name, p in
            inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _checkpoint_args(p):
    p.add_argument('--checkpoint', required=True,
                   help='a checkpoint written by train')
    where = p.add_mutually_exclusive_group()
    where.add_argument('--dataset', default=None,
                       help='the training KG, if it moved (None: the one '
                       'recorded in the checkpoint; a changed or re-split '
                       'KG is refused)')
    where.add_argument('--graph', default=None,
                       help='reason on another KG instead (new entities, '
                       'a new graph): a folder or triples file whose '
                       'relations the model knows, matched by name; its '
                       'facts+train triples are the graph')
    p.add_argument('--graph-choice', type=int, metavar='N',
                   default=GRAPH_CHOICE_TRIPLES,
                   help='with --graph: rank up to N of its facts+train '
                   'triples, each without its own edge, to choose what '
                   'ranks there (u, the longest rules, the aggregation, and '
                   'the model or the rules per relation); 0: the choice '
                   'the checkpoint records for new graphs')
    p.add_argument('--device', default='cpu', help='cpu, cuda, cuda:1, ...')


def _scorer(args, payload, model, scorer, data):
    # The checkpoint's scorer (scorer "auto"), its rules or its model, for
    # the KG the command reasons on; on another graph, chosen on that
    # graph's triples (once per command, said in a line).
    if args.graph is None or scorer == 'model' or not args.graph_choice or \
            payload.get('rules') is None or \
            payload['rules'].get('support') is None:
        return scorer_from_checkpoint(payload, model, scorer,
                                      new_graph=args.graph is not None)
    choice = getattr(args, 'graph_choice_made', None)
    if choice is None:
        rules = AppliedRules.from_payload(payload['rules'], tie_break=model)
        choice = choose_on_graph(
            rules.to(next(model.parameters()).device), data,
            (payload.get('new_graph') or {}).get('unseen'),
            args.graph_choice,
            num_candidates=getattr(args, 'eval_candidates', None))
        args.graph_choice_made = choice
        print(f'on a new graph: {choice.reason}')
    return choice.scorer if scorer == 'auto' else choice.rules


def _rule_text(rule, data) -> str:
    # Constant rules name entities; the others only relations.
    if isinstance(rule, ConstantRule):
        return rule.format(data.relation_names, data.entity_names)
    return rule.format(data.relation_names)


def _load(args, outputs=()):
    # The checkpoint, its model and the KG to reason on; the command's
    # output files (path, what, kind; path None: none) are checked against
    # its inputs before the KG is read.
    device = _device(args.device)
    if args.graph_choice < 0:
        raise CLIError(f'--graph-choice must be at least 0, got '
                       f'{args.graph_choice}')
    payload = load_checkpoint(args.checkpoint)
    source = args.graph or args.dataset or payload['kg'].get('source')
    inputs = [args.checkpoint]
    if source is not None:
        try:
            inputs += input_files(dataset_path(source))
        except FileNotFoundError:
            pass  # model_and_data says so
    for path, what, kind in outputs:
        if path is not None:
            check_output(path, what, kind, inputs)
    model, data = model_and_data(payload, args.checkpoint, args.dataset,
                                 device, graph=args.graph)
    return payload, model, data


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise CLIError(f'unknown device {name!r} (cpu, cuda, cuda:1, mps, '
                       '...)') from None
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise CLIError(f'--device {name}: CUDA is not available on this '
                           'machine (use --device cpu)')
        if device.index is not None and \
                device.index >= torch.cuda.device_count():
            raise CLIError(f'--device {name}: this machine has '
                           f'{torch.cuda.device_count()} CUDA device(s)')
    elif device.type == 'mps' and not torch.backends.mps.is_available():
        raise CLIError(f'--device {name}: MPS is not available')
    elif device.type not in ('cpu', 'cuda', 'mps'):
        raise CLIError(f'--device {name}: only cpu, cuda and mps are '
                       'supported')
    return device


def _entity(data, name: str) -> int:
    # An entity name, or an index written #N (or N, where no entity is
    # named so).
    names = data.entity_names
    if name in names:
        return names.index(name)
    text = name[1:] if name.startswith('#') else name
    if text.isdigit() and int(text) < len(names):
        print(f'entity {name}: index {text}, named {names[int(text)]!r}')
        return int(text)
    raise CLIError(f'unknown entity {name!r} (a name, or #index in '
                   f'[0, {len(names)}))')


def _query_text(data, head: int, relation: int) -> str:
    # "head relation ?", or "? relation head" for an inverse query.
    R, name = data.num_relations, data.entity_names[head]
    if relation >= R:
        return f'? {data.relation_names[relation - R]} {name}'
    return f'{name} {data.relation_names[relation]} ?'


def _relation(data, name: str) -> int:
    names = list(data.relation_names)
    if name in names:
        return names.index(name)
    if name.startswith('inv_') and name[4:] in names:
        return names.index(name[4:]) + data.num_relations
    more = ', ...' if len(names) > 10 else ''
    raise CLIError(f"unknown relation {name!r} (known: "
                   f"{', '.join(names[:10])}{more})")


def _report(model, data, split, json_path, quiet=False, progress=True,
            typed=True, timing=None, num_candidates=None):
    start = time.perf_counter()
    ranks = compute_ranks(model, data, split, progress=progress and not quiet,
                          typed=typed, num_candidates=num_candidates)
    seconds = time.perf_counter() - start
    metrics = {tie: ranks.metrics(tie, list(data.relation_names))
               for tie in TIE_POLICIES}
    if quiet:
        return
    print(f'filtered {split} metrics ({ranks.relation.numel()} queries, '
          'both directions' + (', typed: each answer ranked among the '
                               'entities of its type' if ranks.typed
                               else '') + f'; ranked in {seconds:.1f}s)')
    if num_candidates is not None:
        print(f'sampled candidates: each answer ranked against '
              f'{num_candidates} of its filtered candidates drawn at random '
              '(the OGB protocol; not comparable with full ranking)')
    print(f"{'ties':<12}{'MRR':>8}{'MR':>9}{'H@1':>8}{'H@3':>8}{'H@10':>8}"
          f"{'H@10(50)':>10}")
    for tie, m in metrics.items():
        print(f"{tie:<12}{m['mrr']:8.4f}{m['mr']:9.2f}{m['hits@1']:8.4f}"
              f"{m['hits@3']:8.4f}{m['hits@10']:8.4f}{m[SAMPLED]:10.4f}")
    print('ties: where the answer stands among candidates with its score: '
          'first (optimistic), last (pessimistic), in the middle '
          '(realistic, the honest one); H@10(50): expected Hits@10 among '
          'the answer and 49 random non-answers (GraIL)')
    if json_path:
        save_json(json_path, {'split': split, 'typed': ranks.typed,
                              'eval_candidates': num_candidates,
                              'metrics': metrics,
                              'ranking_seconds': seconds, **(timing or {})})
        print(f'metrics: {json_path}')
