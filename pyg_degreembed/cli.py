r"""The :obj:`pyg-degreembed` command line.

.. code-block:: bash

    pyg-degreembed train --dataset family --checkpoint runs/family.pt
    pyg-degreembed evaluate --checkpoint runs/family.pt
    pyg-degreembed evaluate --checkpoint runs/fb237_v1.pt \
        --graph fb237_v1_ind
    pyg-degreembed predict --checkpoint runs/family.pt --head 1 \
        --relation brother
    pyg-degreembed rules --checkpoint runs/family.pt --relation aunt
    pyg-degreembed explain --checkpoint runs/family.pt --head 1 \
        --relation brother --tail 3
    pyg-degreembed saturation --dataset family --relation brother
    pyg-degreembed plot --checkpoint runs/family.pt --out embedding.png

A failure exits with status 2 and one line :obj:`error: ...` on stderr.
"""
import argparse
import inspect
import os
import signal
import sys
import threading
import time
import warnings
from contextlib import nullcontext
from typing import List, Optional

import torch
from torch_geometric import seed_everything

from pyg_degreembed.data.datasets import BUNDLED, dataset_path, load_dataset
from pyg_degreembed.data.io import KGFormatError
from pyg_degreembed.data.kg import check_head_type, relation_name
from pyg_degreembed.evaluation.predict import predict, reflexive
from pyg_degreembed.evaluation.ranks import (SAMPLED, TIE_POLICIES,
                                             compute_ranks)
from pyg_degreembed.interpret.anyburl import anyburl_lines, read_anyburl
from pyg_degreembed.interpret.applied_rules import check_mining
from pyg_degreembed.interpret.constant_rules import ConstantRule
from pyg_degreembed.interpret.explain import explain
from pyg_degreembed.interpret.mining import MINERS, mine_counts
from pyg_degreembed.interpret.rule_length import choose_rule_length
from pyg_degreembed.interpret.saturation import saturation, saturation_table
from pyg_degreembed.nn import DegreEmbedReasoner, RuleReasoner
from pyg_degreembed.training.budget import (PARAMETER_COPIES, check_memory,
                                            parameter_bytes)
from pyg_degreembed.training.checkpoint import (SCORERS, CheckpointError,
                                                load_checkpoint,
                                                model_and_data,
                                                save_checkpoint, save_json,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.config import TrainConfig
from pyg_degreembed.training.distributed import init_from_env, world
from pyg_degreembed.training.files import (check_output, exclusive,
                                           input_files)
from pyg_degreembed.training.loop import TrainingInterrupted, fit
from pyg_degreembed.training.runtime import retain_freed_memory
from pyg_degreembed.training.scorer import PerRelationScorer, choose_scorer
from pyg_degreembed.training.time_plan import DEFAULT_SECONDS, TimePlan
from pyg_degreembed.version import __version__

MODELS = {
    'degreembed': (DegreEmbedReasoner, {}),
    'drum': (RuleReasoner, {}),
    'neurallp': (RuleReasoner, {'rank': 1}),
}


class CLIError(Exception):
    r"""A user error reported as one line."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    r"""Shows defaults, and marks required options as required instead of
    showing a default they do not have."""
    def _get_help_string(self, action):
        if action.required:
            return f'{action.help} (required)'
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    r"""Reports a bad command line as one line :obj:`error: ...` (exit 2),
    like every other failure, instead of argparse's usage block."""
    def error(self, message: str):
        print(f'error: {self.prog}: {message} (see {self.prog} --help)',
              file=sys.stderr)
        sys.exit(2)


class _Terminated(Exception):
    r"""SIGTERM, raised in the main thread so that locks and temporary
    files are released on the way out."""


def _terminate(signum, frame):
    raise _Terminated()


def _show_warning(message, category, filename, lineno, file=None,
                  line=None):
    # A warning on the command line: one line, like the errors.
    print(f'warning: {message}', file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    started = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
    retain_freed_memory()
    previous = signal.signal(signal.SIGTERM, _terminate) \
        if threading.current_thread() is threading.main_thread() else None
    show_warning, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        args.handler(args)
    except (CLIError, CheckpointError, KGFormatError, OSError,
            ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except MemoryError:
        print('error: out of memory (the machine has too little for this '
              'setting: try a smaller --batch-size, --dim or --steps)',
              file=sys.stderr)
        return 2
    except TrainingInterrupted as e:  # saved where it stood
        print(f'error: {e}', file=sys.stderr)
        return 143 if e.signum == signal.SIGTERM else 130
    except (KeyboardInterrupt, _Terminated) as e:
        what = 'interrupted' if isinstance(e, KeyboardInterrupt) else \
            'terminated (SIGTERM)'
        saved = getattr(args, 'saved_run', None)
        if saved is not None and os.path.exists(saved):
            what += f'; {saved} holds the run so far: add --resume to go on'
        print(f'error: {what}', file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    except Exception as e:  # a bug: still one line, the traceback on demand
        if os.environ.get('PYG_DEGREEMBED_TRACEBACK'):
            raise
        message = str(e).strip().splitlines()
        print(f'error: internal error ({type(e).__name__}'
              f'{": " + message[0] if message else ""}); run with '
              'PYG_DEGREEMBED_TRACEBACK=1 for the traceback and please '
              'report it', file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = show_warning
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog='pyg-degreembed',
        description='Learn logic rules on knowledge graphs (DegreEmbed, '
        'DRUM, Neural LP), predict links and explain them.')
    parser.add_argument('--version', action='version',
                        version=f'pyg-degreembed {__version__}')
    sub = parser.add_subparsers(dest='command', required=True)
    for add in (_train_parser, _evaluate_parser, _predict_parser,
                _rules_parser, _explain_parser, _saturation_parser,
                _plot_parser):
        add(sub)
    return parser


def _command(sub, name: str, help: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=help,
                          formatter_class=_HelpFormatter)


def _train_parser(sub):
    # The defaults: TrainConfig's (the training settings), the
    # models' and fit()'s.
    train_default = TrainConfig()
    model_default = _defaults(RuleReasoner)
    fit_default = _defaults(fit)
    p = _command(sub, 'train', 'train and evaluate a model')
    p.add_argument('--dataset', default='family',
                   help="bundled name (family, kinship, umls), a Neural-LP "
                   "folder or a triples file")
    p.add_argument('--model', default='degreembed', choices=list(MODELS),
                   help='the rule learner')
    p.add_argument('--steps', type=_steps, default='auto',
                   help="maximum rule length L; 'auto': from the data "
                   "(2, lengthened up to 5 while one more edge reaches at "
                   "least 5 %% more held-out training answers; 2 is the "
                   "paper's)")
    p.add_argument('--scorer', default='auto', choices=list(SCORERS),
                   help="what ranks answers: 'rules', the path rules of "
                   "length <= L and the constant rules mined from the "
                   "training graph, confidence support / (groundings + u) "
                   "with u chosen on validation, best rule first, the "
                   "trained model breaking ties; 'model', the model's own "
                   "score (the paper's); 'auto', per query relation the one "
                   "with the better validation MRR")
    p.add_argument('--rank', type=int, default=model_default['rank'],
                   help='rank T (neurallp always uses 1)')
    p.add_argument('--dim', type=int, default=model_default['embedding_dim'],
                   help='embedding and LSTM size')
    p.add_argument('--epochs', type=int, default=train_default.epochs,
                   help='maximum number of epochs (early stopping usually '
                   'ends sooner)')
    p.add_argument('--patience', type=int, default=train_default.patience,
                   help='epochs without a better validation MRR before '
                   'stopping')
    p.add_argument('--batch-size', type=int,
                   default=train_default.batch_size,
                   help='training queries per step')
    p.add_argument('--lr', type=float, default=train_default.lr,
                   help='Adam learning rate')
    p.add_argument('--edge-weight-lr', type=_rate_or_none,
                   default=train_default.edge_weight_lr,
                   help="learning rate of the degree embedding ('none': "
                   "--lr, how checkpoints written before this option "
                   "were trained)")
    p.add_argument('--edge-weight-decay', type=float,
                   default=train_default.edge_weight_decay,
                   help='L2 penalty on the degree embedding (0: none, how '
                   'checkpoints written before this option were trained)')
    p.add_argument('--loss', default=train_default.loss,
                   choices=['nll', 'bce'], help='training loss')
    p.add_argument('--max-steps', type=int, default=None,
                   help='end training after this many optimisation steps '
                   'in all (None: no limit); the best weights so far are '
                   'kept and --resume goes on')
    p.add_argument('--time-budget', type=_seconds_or_none,
                   default=DEFAULT_SECONDS,
                   help="seconds for the whole run up to a saved model and "
                   "its validation choice: set-up, mining, training (ended "
                   "as by --max-steps, resumable), the choice on the "
                   "validation triples ranked in time; the test ranking "
                   "after it is timed apart; 'none': no limit (mining and "
                   "training run to their end)")
    p.add_argument('--miner', default='auto', choices=list(MINERS),
                   help="how the path rules are counted: 'exact' enumerates "
                   "every path of up to L edges; 'sampled' finds rules on "
                   "sampled training triples and scores them on sampled "
                   "groundings (AnyBURL's way), within the mining share of "
                   "the budget; 'auto': exact where it is expected to fit "
                   "that share, else sampled")
    p.add_argument('--seed', type=int, default=train_default.seed,
                   help='seed of the initialisation and the shuffling')
    p.add_argument('--device', default='cpu', help='cpu, cuda, cuda:1, ...')
    p.add_argument('--recompute', action='store_true',
                   help='memory-lean: recompute each hop in the backward '
                   'pass instead of storing it (slower)')
    p.add_argument('--checkpoint', default=None,
                   help='checkpoint file, written every epoch (None: '
                   'runs/<dataset>-<model>.pt)')
    p.add_argument('--resume', action='store_true',
                   help='continue from --checkpoint if it exists (refused '
                   'if the data, model or settings changed)')
    p.add_argument('--overwrite', action='store_true',
                   help='replace an existing --checkpoint')
    p.add_argument('--allow-config-change', action='store_true',
                   help='with --resume: accept other --lr, --edge-weight-lr, '
                   '--batch-size, '
                   '--seed, --loss or --patience than the checkpoint had')
    p.add_argument('--json', default=None,
                   help='metrics file (None: the checkpoint with .json)')
    p.add_argument('--no-progress', action='store_true',
                   help='no progress bar or progress lines')
    p.add_argument('--progress-interval', type=float,
                   default=fit_default['progress_interval'],
                   help='seconds between two progress lines when the '
                   'output is not a terminal')
    p.set_defaults(handler=cmd_train)


def _evaluate_parser(sub):
    p = _command(sub, 'evaluate', 'filtered ranking metrics')
    _checkpoint_args(p)
    p.add_argument('--scorer', default='auto', choices=list(SCORERS),
                   help="'auto': the one train chose (recorded in the "
                   "checkpoint)")
    p.add_argument('--split', default='test',
                   choices=['train', 'valid', 'test'],
                   help='the triples to rank (train: each query without '
                   'its own edge, as in training)')
    p.add_argument('--untyped', action='store_true',
                   help='in a typed KG (entity_types.txt), rank among all '
                   "entities, not only those of the answer's type")
    p.add_argument('--anyburl', default=None,
                   help='rank with the rules of this AnyBURL rule file '
                   "instead (cyclic path rules; the checkpoint's model "
                   'breaks ties)')
    p.add_argument('--json', default=None,
                   help='write the metrics here (None: do not)')
    p.set_defaults(handler=cmd_evaluate)


def _predict_parser(sub):
    p = _command(sub, 'predict', "top-k new answers of 'head relation ?'")
    _checkpoint_args(p)
    p.add_argument('--head', required=True,
                   help='head entity: a name, or #index')
    p.add_argument('--relation', required=True,
                   help="relation name (inv_<name> asks for heads)")
    p.add_argument('--k', type=int, default=10, help='answers to show')
    p.add_argument('--untyped', action='store_true',
                   help='in a typed KG (entity_types.txt), list entities of '
                   "any type, not only the relation's answer type")
    p.add_argument('--show-known', action='store_true',
                   help='also list answers already in the KG, marked')
    p.add_argument('--scorer', default='auto', choices=list(SCORERS),
                   help="what ranks the answers; 'auto': the one train "
                   'chose (recorded in the checkpoint)')
    p.set_defaults(handler=cmd_predict)


def _rules_parser(sub):
    p = _command(sub, 'rules', 'the learned rules')
    _checkpoint_args(p)
    p.add_argument('--relation', default=None,
                   help='one relation (None: all, inverses included)')
    p.add_argument('--k', type=int, default=None,
                   help='rules per relation (None: 5; every rule with '
                   '--format anyburl)')
    p.add_argument('--no-inverse', action='store_true',
                   help='without --relation: only the R forward queries')
    p.add_argument('--confidence', default='grounded',
                   choices=['grounded', 'attention'],
                   help="grounded: each rule's share of the model's score "
                   'on the training queries (what the model does); '
                   'attention: the attention alone, relative to the best '
                   'rule')
    p.add_argument('--applied', action='store_true',
                   help="the checkpoint's applied rules instead: path rules "
                   'and answer-type rules with their empirical confidences')
    p.add_argument('--format', default='text', choices=['text', 'anyburl'],
                   help="'anyburl': the applied path rules as AnyBURL rule "
                   'lines (predictions, correct predictions, confidence, '
                   'rule; --relation and --k select, --json writes them as '
                   'objects)')
    p.add_argument('--json', default=None,
                   help='write the rules here (None: do not)')
    p.set_defaults(handler=cmd_rules)


def _explain_parser(sub):
    p = _command(sub, 'explain', 'the rule paths behind one predicted answer')
    _checkpoint_args(p)
    p.add_argument('--head', required=True,
                   help='head entity: a name, or #index')
    p.add_argument('--relation', required=True,
                   help="relation name (inv_<name> asks for heads)")
    p.add_argument('--tail', required=True,
                   help='the answer to explain: a name, or #index')
    p.add_argument('--k', type=int, default=10, help='paths to show')
    p.add_argument('--remove-edge', action='store_true',
                   help='explain a known fact by the other evidence: '
                   'without the edge (head, relation, tail) and its '
                   'inverse, as training scores it')
    p.add_argument('--plot', default=None,
                   help='draw the paths as a graph into this PNG file '
                   '(None: do not)')
    p.set_defaults(handler=cmd_explain)


def _saturation_parser(sub):
    p = _command(sub, 'saturation',
                 'macro/micro/comprehensive saturation of rule patterns')
    p.add_argument('--dataset', default='family',
                   help='bundled name, Neural-LP folder or triples file')
    p.add_argument('--steps', type=int, default=2,
                   help='maximum pattern length')
    p.add_argument('--graph', default='all', choices=['all', 'observed'],
                   help='triples forming the graph (all splits is the '
                   "paper's convention)")
    p.add_argument('--inverse', action='store_true',
                   help='count paths along inverse edges too')
    p.add_argument('--relation', default=None,
                   help='one relation (None: all)')
    p.add_argument('--top', type=int, default=5,
                   help='patterns shown per relation')
    p.add_argument('--json', default=None,
                   help='write all values here (None: do not)')
    p.set_defaults(handler=cmd_saturation)


def _plot_parser(sub):
    p = _command(sub, 'plot', 't-SNE plot of the degree embeddings')
    _checkpoint_args(p)
    p.add_argument('--out', default='embedding.png', help='the PNG file')
    p.add_argument('--top', type=int, default=10,
                   help='degree-type classes to colour')
    p.set_defaults(handler=cmd_plot)


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


def _steps(text: str):
    if text == 'auto':
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'auto', got {text!r}") from None


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
    p.add_argument('--device', default='cpu', help='cpu, cuda, cuda:1, ...')


def cmd_train(args):
    config = TrainConfig(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        edge_weight_lr=args.edge_weight_lr,
        edge_weight_decay=args.edge_weight_decay, patience=args.patience,
        loss=args.loss, seed=args.seed)
    # Under torchrun (WORLD_SIZE > 1): one process per device, gloo on the
    # CPU, NCCL on GPUs; process 0 prints and writes.
    if init_from_env() and torch.cuda.is_available():
        args.device = f'cuda:{torch.cuda.current_device()}'
    process = world()[1]
    device = _device(args.device)
    name = os.path.basename(os.path.normpath(args.dataset))
    checkpoint = args.checkpoint or os.path.join('runs',
                                                 f'{name}-{args.model}.pt')
    json_path = args.json or os.path.splitext(checkpoint)[0] + '.json'
    if os.path.abspath(json_path) == os.path.abspath(checkpoint):
        raise CLIError(f'the metrics file would overwrite the checkpoint '
                       f'{checkpoint}; give --json another path')
    source = dataset_path(args.dataset)
    inputs = input_files(source)
    check_output(checkpoint, 'checkpoint', 'checkpoint', inputs)
    check_output(json_path, 'metrics', 'json', inputs)
    plan = TimePlan(args.time_budget, getattr(args, 'started', None))
    # One lock for the whole command: the test that the checkpoint is new,
    # training, and the rules and scorer written into it afterwards.
    with exclusive(checkpoint) if process == 0 else nullcontext():
        if os.path.exists(checkpoint) and not args.resume and \
                not args.overwrite:
            raise CLIError(f'{checkpoint} exists; add --resume to continue '
                           'it or --overwrite to replace it')
        args.saved_run = checkpoint  # what a signal's message names
        data, scorer = _train(args, config, plan, source, checkpoint,
                              device, process)
    run_seconds = plan.elapsed
    if process == 0:
        print(f'checkpoint: {checkpoint} (run {run_seconds:.1f}s'
              + ('' if args.time_budget is None else
                 f' of the {args.time_budget:g}s budget') + ')')
    if data.test_edge_type.numel() > 0:
        _report(scorer, data, 'test', json_path, quiet=process != 0,
                progress=not args.no_progress,
                timing={'run_seconds': run_seconds,
                        'time_budget': args.time_budget})


def _train(args, config, plan, source, checkpoint, device, process):
    # train's work up to the saved checkpoint: returns the KG and what
    # ranks its answers.
    if source == args.dataset and args.dataset in BUNDLED and process == 0:
        print(f'dataset: {os.path.abspath(source)} (a path that exists comes '
              f'before the bundled {args.dataset})')
    data = load_dataset(args.dataset)
    if args.steps == 'auto':
        args.steps, shares = choose_rule_length(
            data, time_limit=plan.rule_length_seconds())
        if process == 0:
            print(f'rule length L = {args.steps} (--steps auto: '
                  + ', '.join(f'{100 * share:.1f} %' for share in shares)
                  + ' of held-out training answers within '
                  + ', '.join(map(str, range(1, len(shares) + 1)))
                  + ' edges)')
    cls, fixed = MODELS[args.model]
    model_config = dict(num_steps=args.steps, rank=args.rank,
                        embedding_dim=args.dim, hidden_channels=args.dim,
                        recompute=args.recompute)
    model_config.update(fixed)
    check_memory(PARAMETER_COPIES * parameter_bytes(
        lambda: cls(data.num_relations, **model_config)),
        f'A model with --dim {args.dim} and --rank {args.rank}')
    mine = _mining_plan(args, data, process)
    seed_everything(args.seed)
    model = cls(data.num_relations, **model_config)
    if process == 0:
        print(f'{data.num_nodes} entities, {data.num_relations} relations, '
              f'{data.train_edge_type.numel()} training triples; {model}')
        for split in ('valid', 'test'):
            if data[f'{split}_edge_type'].numel() == 0:
                print(f'no {split} triples: ' + (
                    'training runs all epochs and keeps the last weights'
                    if split == 'valid' else 'no test metrics'))
    mined = None
    if mine:
        mining_seconds = plan.mining_seconds()
        if process == 0:
            print(plan.describe(args.miner))
        mined = mine_counts(data, args.steps, mining_seconds, args.miner,
                            seed=args.seed)
        if process == 0:
            print(f'mining: {mined.description} ({mined.seconds:.1f}s)')
    elif process == 0:
        print(plan.describe('no'))
    result = fit(model, data, config, device=device,
                 progress=not args.no_progress,
                 progress_interval=args.progress_interval,
                 checkpoint=checkpoint,
                 resume=args.resume, overwrite=args.overwrite,
                 allow_config_change=args.allow_config_change,
                 max_steps=args.max_steps,
                 time_budget=plan.training_seconds())
    if result.steps == 0:
        raise CLIError(f'the time budget of {args.time_budget:g}s was spent '
                       f'before the first training step (set-up and mining '
                       f'took {plan.elapsed:.1f}s); give a larger '
                       f'--time-budget (the checkpoint {checkpoint} resumes '
                       'with --resume)')
    scorer = model
    if mine:
        choice = choose_scorer(model, data, args.steps, args.scorer, device,
                               mined=mined, deadline=plan.deadline(),
                               seed=args.seed)
        scorer = choice.scorer
        if process == 0:
            constants = choice.applied.constant_rules
            print(f'applied rules: {choice.applied.rule_key.numel()} path '
                  f'rules of length <= {args.steps}, '
                  f'{0 if constants is None else len(constants)} constant '
                  f'rules, the model as tie-break (choice '
                  f'{choice.mining_seconds:.1f}s)')
            if args.scorer == 'auto':
                print(f'scorer: {choice.name} ({choice.reason})')
            payload = load_checkpoint(checkpoint)
            payload['rules'] = choice.applied.to_payload()
            payload['scorer'] = choice.name
            payload['model_relations'] = choice.use_model
            save_checkpoint(checkpoint, payload)
    return data, scorer


def _mining_plan(args, data, process: int) -> bool:
    # Whether train mines applied rules: checked before training, so that a
    # rule length too long to enumerate is refused (--miner exact) before
    # the work; --miner auto samples it instead.
    if args.scorer == 'model':
        return False
    if args.miner == 'exact':
        try:
            check_mining(data, args.steps)
        except ValueError as e:
            raise CLIError(f'--miner exact: {e} (--miner sampled finds '
                           'the rules by sampling)') from None
    return True


def cmd_evaluate(args):
    payload, model, data = _load(args, [(args.json, 'metrics', 'json')])
    if data[f'{args.split}_edge_type'].numel() == 0:
        raise CLIError(f'the {args.split} split of {data.source} is empty: '
                       'nothing to evaluate')
    if args.anyburl:
        scorer = read_anyburl(args.anyburl, data.relation_names,
                              tie_break=model)
        scorer = scorer.to(next(model.parameters()).device)
        print(f'scorer: {scorer.rule_key.numel() // 2} cyclic path rules of '
              f'{args.anyburl} ({scorer.skipped} other rules skipped), the '
              'model breaking ties')
        return _report(scorer, data, args.split, args.json,
                       typed=not args.untyped)
    scorer = _scorer(args, payload, model, args.scorer)
    if isinstance(scorer, PerRelationScorer):
        print(f'scorer: per query relation, the model '
              f'({int(scorer.use_model.sum())} of {scorer.use_model.numel()}'
              ') or the applied rules, the model as their tie-break '
              '(--scorer rules|model: one of them)')
    elif scorer is not model:
        print('scorer: the applied rules, the model as tie-break '
              '(--scorer model: the model alone)')
    _report(scorer, data, args.split, args.json, typed=not args.untyped)


def cmd_predict(args):
    payload, model, data = _load(args)
    scorer = _scorer(args, payload, model, args.scorer)
    head = _entity(data, args.head)
    relation = _relation(data, args.relation)
    if args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    answers = predict(scorer, data, head, relation, args.k,
                      filter_known=not args.show_known,
                      typed=not args.untyped)
    print(f'query: {_query_text(data, head, relation)}')
    head_note = '' if reflexive(data, relation) else \
        '; the head itself is not an answer'
    if args.show_known:
        print('filter: none (answers already in the KG are marked '
              f'"known"){head_note}')
    else:
        print(f'filter: answers already in the KG (any split) are left out '
              f'(--show-known lists them){head_note}')
    if isinstance(scorer, PerRelationScorer) and \
            scorer.use_model[relation]:
        scorer = model  # the model ranks this query relation
    what = "the model's sum over rule paths" if scorer is model else \
        'the applied rules, the model breaking ties'
    print(f"{'rank':>4}  {'score':>10}  entity    (score: {what}; higher "
          'first; not a probability)')
    for place, answer in enumerate(answers, start=1):
        marks = [m for m, on in (('known', answer.known),
                                 ('head', answer.is_head)) if on]
        mark = f"  ({', '.join(marks)})" if marks else ''
        print(f'{place:>4}  {answer.score:10.4g}  '
              f'{data.entity_names[answer.entity]}{mark}')
    if len(answers) < args.k:
        print('      (no other entity has a score above 0)')


def cmd_rules(args):
    if args.k is not None and args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    payload, model, data = _load(args, [(args.json, 'rules', 'json')])
    relation = None if args.relation is None else \
        _relation(data, args.relation)
    if args.format == 'anyburl':
        applied = _scorer(args, payload, model, 'rules')
        lines = anyburl_lines(applied, data.relation_names, relation, args.k)
        for line in lines:
            print(line)
        if args.json:
            save_json(args.json, [dict(zip(
                ('predictions', 'correct', 'confidence', 'rule'),
                (int(a), int(b), float(c), rule)))
                for a, b, c, rule in (line.split('\t') for line in lines)])
        return
    if args.k is None:
        args.k = 5
    if args.applied:
        return _applied_rules(args, payload, model, data, relation)
    rules = model.rules(relation, args.k, inverse=not args.no_inverse,
                        data=data, confidence=args.confidence)
    out = []
    for rule in rules:
        print(rule.format(data.relation_names))
        out.append({
            'head': relation_name(data, rule.head),
            'body': [relation_name(data, k) for k in rule.body],
            'confidence': rule.confidence,
            'confidence_kind': args.confidence,
            'text': rule.format(data.relation_names),
        })
    if args.json:
        save_json(args.json, out)


def _applied_rules(args, payload, model, data, relation):
    applied = _scorer(args, payload, model, 'rules')
    relations = [relation] if relation is not None else range(
        data.num_relations * (1 if args.no_inverse else 2))
    out = []
    for q in relations:
        for kind, rules in (
                ('path', applied.rules(q)[:args.k]),
                ('constant', applied.constant_rules_of(q)[:args.k]),
                ('answer type', applied.type_rules(q)[:args.k])):
            for rule in rules:
                text = _rule_text(rule, data)
                print(text)
                out.append({'head': relation_name(data, q), 'kind': kind,
                            'confidence': rule.confidence, 'text': text})
    if args.json:
        save_json(args.json, out)


def _scorer(args, payload, model, scorer):
    # The checkpoint's scorer, for the KG the command reasons on.
    return scorer_from_checkpoint(payload, model, scorer,
                                  new_graph=args.graph is not None)


def _rule_text(rule, data) -> str:
    # Constant rules name entities; the others only relations.
    if isinstance(rule, ConstantRule):
        return rule.format(data.relation_names, data.entity_names)
    return rule.format(data.relation_names)


def cmd_explain(args):
    if args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    payload, model, data = _load(args, [(args.plot, 'plot', 'png')])
    head, tail = _entity(data, args.head), _entity(data, args.tail)
    relation = _relation(data, args.relation)
    check_head_type(data, head, relation)
    result = explain(model, data, head, relation, tail,
                     remove_edge=args.remove_edge)
    print(f'score of {data.entity_names[tail]} for '
          f'{_query_text(data, head, relation)}'
          f'{" without its edge" if args.remove_edge else ""}: '
          f'{result.score:.4g} (the sum of the rule paths below)')
    for path in result.paths[:args.k]:
        print('  ' + path.format(data.entity_names, data.relation_names))
    rest = len(result.paths) - args.k
    if rest > 0:
        print(f'  ... and {rest} more paths')
    if payload.get('rules') is not None:
        applied = _scorer(args, payload, model, 'rules')
        rules, answer_type = applied.explain(data, head, relation, tail)
        ranker = _scorer(args, payload, model, 'auto')
        if ranker is model or (isinstance(ranker, PerRelationScorer) and
                               ranker.use_model[relation]):
            role = 'the model ranks this query relation, not they'
        else:
            role = 'they rank it, the model breaks ties'
        print(f'applied rules that reach {args.tail} (best first; {role}):')
        for rule in rules[:args.k]:
            print('  ' + _rule_text(rule, data))
        if not rules:
            print('  none')
        if answer_type is not None:
            print('  best answer-type rule: ' +
                  answer_type.format(data.relation_names))
    if args.plot:
        from pyg_degreembed.interpret.plot import plot_explanation
        plot_explanation(result, args.plot, data.entity_names,
                         data.relation_names, max_paths=max(args.k, 1))
        print(f'plot: {args.plot}')


def cmd_saturation(args):
    if args.top < 0:
        raise CLIError(f'--top must be at least 0, got {args.top}')
    if args.json:
        check_output(args.json, 'saturation values', 'json',
                     input_files(dataset_path(args.dataset)))
    data = load_dataset(args.dataset)
    relations = None if args.relation is None else \
        [_relation(data, args.relation)]
    if relations and relations[0] >= data.num_relations:
        raise CLIError('saturation is defined for relations, not inverses')
    items = saturation(data, args.steps, graph=args.graph,
                       inverse=args.inverse, relations=relations)
    print(saturation_table(items, list(data.relation_names), args.top))
    if args.json:
        save_json(args.json, [{
            'relation': data.relation_names[s.relation],
            'pattern': [relation_name(data, k) for k in s.pattern],
            'macro': s.macro, 'micro': s.micro,
            'comprehensive': s.comprehensive} for s in items])


def cmd_plot(args):
    from pyg_degreembed.interpret.plot import plot_entity_embedding
    if args.top < 0:
        raise CLIError(f'--top must be at least 0, got {args.top}')
    _, model, data = _load(args, [(args.out, 'plot', 'png')])
    plot_entity_embedding(model, data, args.out,
                          top=args.top,
                          relation_names=list(data.relation_names))
    print(f'plot: {args.out}')


def _load(args, outputs=()):
    # The checkpoint, its model and the KG to reason on; the command's
    # output files (path, what, kind; path None: none) are checked against
    # its inputs before the KG is read.
    device = _device(args.device)
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
            typed=True, timing=None):
    start = time.perf_counter()
    ranks = compute_ranks(model, data, split, progress=progress and not quiet,
                          typed=typed)
    seconds = time.perf_counter() - start
    metrics = {tie: ranks.metrics(tie, list(data.relation_names))
               for tie in TIE_POLICIES}
    if quiet:
        return
    print(f'filtered {split} metrics ({ranks.relation.numel()} queries, '
          'both directions' + (', typed: each answer ranked among the '
                               'entities of its type' if ranks.typed
                               else '') + f'; ranked in {seconds:.1f}s)')
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
                              'metrics': metrics,
                              'ranking_seconds': seconds, **(timing or {})})
        print(f'metrics: {json_path}')


if __name__ == '__main__':
    sys.exit(main())
