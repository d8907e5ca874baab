r"""The :obj:`train` command: set-up, mining, training and the validation
choice under one time budget, then the test ranking."""
import os
from contextlib import nullcontext
from dataclasses import replace

import torch
from torch_geometric import seed_everything

from pyg_degreembed.cli.common import (CLIError, _command, _defaults, _device,
                                       _eval_candidates_arg, _gigabytes,
                                       _rate_or_none,
                                       _report, _seconds_or_none, _steps)
from pyg_degreembed.data.datasets import BUNDLED, dataset_path, load_dataset
from pyg_degreembed.interpret.applied_rules import check_mining
from pyg_degreembed.interpret.mining import MINERS, mine_counts
from pyg_degreembed.interpret.rule_length import choose_rule_length
from pyg_degreembed.nn import DegreEmbedReasoner, RuleReasoner
from pyg_degreembed.training.budget import (PARAMETER_COPIES, check_memory,
                                            parameter_bytes, training_batch)
from pyg_degreembed.training.checkpoint import (SCORERS, load_checkpoint,
                                                save_checkpoint)
from pyg_degreembed.training.config import TrainConfig
from pyg_degreembed.training.distributed import init_from_env, world
from pyg_degreembed.training.files import check_output, exclusive, input_files
from pyg_degreembed.training.loop import fit
from pyg_degreembed.training.scorer import (AGGREGATION_CHOICES,
                                            AGGREGATION_SETTINGS,
                                            PRUNE_SUPPORTS,
                                            choose_scorer, describe)
from pyg_degreembed.training.time_plan import DEFAULT_SECONDS, TimePlan

MODELS = {
    'degreembed': (DegreEmbedReasoner, {}),
    'drum': (RuleReasoner, {}),
    'neurallp': (RuleReasoner, {'rank': 1}),
}


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
    p.add_argument('--aggregation', default='auto',
                   choices=['max-plus', 'noisy-or', 'combined',
                            'non-redundant', 'auto'],
                   help="how the rules that reach an answer rank it: "
                   "'noisy-or', 1 - prod(1 - confidence) of its best rules "
                   "first, then as 'max-plus', the best rule first, ties "
                   "by the next; 'combined', the noisy-or of the rules and "
                   "of the model's score scaled to the query's best, with "
                   "a weight; 'non-redundant', the noisy-or with rules "
                   "whose predictions on the training graph overlap "
                   "counted once (SAFRAN's); 'auto', the one of the first "
                   "three with the best validation MRR")
    p.add_argument('--cut-rules', action='store_true',
                   help='choose with the aggregation, on validation, the '
                   'longest rules kept (of up to L, L - 1, ..., 2 edges; '
                   'the full length unless a cut gains beyond noise)')
    p.add_argument('--prune', action='store_true',
                   help='leave out the rules met fewer than 3, 5, 10 or 20 '
                   'times in the training graph: the most that costs the '
                   "rules' validation MRR at most 0.001 (a smaller rule "
                   "set; under a time budget the prune takes a quarter of "
                   "the validation choice's share)")
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
    p.add_argument('--batch-size', type=int, default=None,
                   help=f'training queries per step (None: '
                   f'{train_default.batch_size}, or the largest power of '
                   'two below it whose step fits the memory; a resumed run '
                   "keeps its checkpoint's)")
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
    _eval_candidates_arg(p)
    p.add_argument('--max-memory', type=_gigabytes, default=None,
                   metavar='GB',
                   help='the resident memory the run sizes itself to (each '
                   'process under torchrun): the training and ranking '
                   "batches and the rules' path expansions count at most "
                   'nine tenths of this (a tenth is headroom) less what the '
                   'process holds, and freed memory is '
                   'handed back to the system instead of kept for reuse '
                   '(steps are slower); it sizes, it does not enforce '
                   "(None: the machine's available memory)")
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


def cmd_train(args):
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=TrainConfig().batch_size if args.batch_size is None
        else args.batch_size, lr=args.lr,
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
                        'time_budget': args.time_budget,
                        'stage_seconds': plan.stages},
                num_candidates=args.eval_candidates)


def _train(args, config, plan, source, checkpoint, device, process):
    # train's work up to the saved checkpoint: returns the KG and what
    # ranks its answers.
    if source == args.dataset and args.dataset in BUNDLED and process == 0:
        print(f'dataset: {os.path.abspath(source)} (a path that exists comes '
              f'before the bundled {args.dataset})')
    data = load_dataset(args.dataset)
    if args.steps == 'auto':
        args.steps, shares, measured = choose_rule_length(
            data, time_limit=plan.rule_length_seconds())
        if process == 0:
            print(f'rule length L = {args.steps} (--steps auto: '
                  + ', '.join(f'{100 * share:.1f} %' for share in shares)
                  + f' of {measured} held-out training answers within '
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
    batch = _batch_size(args, config, model, data, checkpoint, device,
                        process)
    config = replace(config, batch_size=batch)
    mined = None
    if mine:
        mining_seconds = plan.mining_seconds()
        plan.end_stage('set-up')
        if process == 0:
            print(plan.describe(args.miner))
        mined = mine_counts(data, args.steps, mining_seconds, args.miner,
                            seed=args.seed)
        plan.end_stage('mining')
        if process == 0:
            print(f'mining: {mined.description} ({mined.seconds:.1f}s)')
    else:
        plan.end_stage('set-up')
        if process == 0:
            print(plan.describe('no'))
    if mine and args.batch_size is None and device.type == 'cpu' and \
            not (args.resume and os.path.exists(checkpoint)):
        # What mining holds now is not available to training: the
        # automatic batch probed again, halved if it no longer fits.
        smaller = training_batch(model, data, batch, automatic=True)
        if smaller != batch and process == 0:
            print(f'batch size {smaller} (after mining, {batch} no longer '
                  'fits the memory)')
        config = replace(config, batch_size=smaller)
    result = fit(model, data, config, device=device,
                 progress=not args.no_progress,
                 progress_interval=args.progress_interval,
                 checkpoint=checkpoint,
                 resume=args.resume, overwrite=args.overwrite,
                 allow_config_change=args.allow_config_change,
                 max_steps=args.max_steps,
                 time_budget=plan.training_seconds())
    plan.end_stage('training')
    if result.steps == 0:
        raise CLIError(f'the time budget of {args.time_budget:g}s was spent '
                       f'before the first training step (set-up and mining '
                       f'took {plan.elapsed:.1f}s); give a larger '
                       f'--time-budget (the checkpoint {checkpoint} resumes '
                       'with --resume)')
    scorer = model
    if mine:
        aggregations = AGGREGATION_CHOICES if args.aggregation == 'auto' \
            else AGGREGATION_SETTINGS[args.aggregation]
        choice = choose_scorer(model, data, args.steps, args.scorer, device,
                               mined=mined, deadline=plan.deadline(),
                               seed=args.seed, aggregations=aggregations,
                               num_candidates=args.eval_candidates,
                               max_lengths=range(args.steps, 1, -1)
                               if args.cut_rules else None,
                               min_supports=PRUNE_SUPPORTS if args.prune
                               else ())
        scorer = choice.scorer
        if process == 0:
            constants = choice.applied.constant_rules
            print(f'applied rules: {choice.applied.rule_key.numel()} path '
                  f'rules of length <= {choice.applied.num_steps}, '
                  f'{0 if constants is None else len(constants)} constant '
                  f'rules, {describe(choice.aggregation)}' +
                  ('' if choice.aggregation.model_weight else
                   ', the model as tie-break') +
                  f' (choice {choice.mining_seconds:.1f}s)')
            if choice.pruned is not None:
                print(choice.pruned)
            if args.scorer == 'auto':
                print(f'scorer: {choice.name} ({choice.reason})')
            if choice.new_graph is not None:
                print(f'on new graphs: {choice.new_graph.name} (u = '
                      f'{choice.new_graph.unseen:g}; '
                      f'{choice.new_graph.reason})')
            payload = load_checkpoint(checkpoint)
            payload['rules'] = choice.applied.to_payload()
            payload['scorer'] = choice.name
            payload['model_relations'] = choice.use_model
            payload['relation_settings'] = choice.relation_settings()
            payload['new_graph'] = None if choice.new_graph is None else \
                choice.new_graph.to_payload()
            save_checkpoint(checkpoint, payload)
        plan.end_stage('choice')
    return data, scorer


def _batch_size(args, config, model, data, checkpoint, device,
                process) -> int:
    # The batch of this run, checked against the memory before mining: the
    # one asked for; else a resumed run's, or the default, halved until its
    # step fits.
    if args.batch_size is None and args.resume and \
            os.path.exists(checkpoint):
        return load_checkpoint(checkpoint)['fit']['batch_size']
    if device.type != 'cpu':
        return config.batch_size
    batch = training_batch(model, data, config.batch_size,
                           automatic=args.batch_size is None)
    if batch != config.batch_size and process == 0:
        print(f'batch size {batch} (the default {config.batch_size} does '
              'not fit the memory; --batch-size to choose)')
    return batch


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
