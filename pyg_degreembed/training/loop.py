r"""Training a rule reasoner: a small, reusable fit loop."""
import math
import os
import signal
import threading
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (all_triples, answer_types,
                                    check_positive_ints, split_triples)
from pyg_degreembed.evaluation.ranks import (Ranks, TrueAnswers,
                                             both_directions,
                                             rank_queries)
from pyg_degreembed.training.budget import (check_memory,
                                            training_estimate)
from pyg_degreembed.training.checkpoint import (FORMAT, CheckpointError,
                                                check_kg, kg_fingerprint,
                                                load_checkpoint, model_spec,
                                                save_checkpoint)
from pyg_degreembed.training.config import LOSSES, TrainConfig
from pyg_degreembed.training.distributed import (all_reduce_gradients,
                                                 all_reduce_number,
                                                 broadcast_parameters, world)
from pyg_degreembed.training.files import check_writable, exclusive
from pyg_degreembed.training.progress import Progress, log_line
from pyg_degreembed.training.threads import ThreadGuard, training_probe
from pyg_degreembed.version import __version__


def rule_loss(scores: Tensor, target: Tensor, loss: str = 'nll',
              eps: float = 1e-20, max_score: float = 1.) -> Tensor:
    r"""The training loss of a batch, averaged over queries.

    * :obj:`"nll"` (Neural LP / DRUM reference code):
      :math:`-\log \max(s_t, \epsilon)`.
    * :obj:`"bce"` (the paper's text): binary cross-entropy between the
      one-hot target and :math:`p = s / s_{\max}`, summed over entities.
      A rule reasoner's score is a sum over its :math:`T` ranks of
      distributions over the entities, so :math:`s_{\max} = T` puts every
      :math:`p` in :math:`[0, 1]` (they sum to at most 1); :math:`p` is
      clamped to :math:`[\epsilon, 1 - \epsilon]` against :math:`\log 0`
      only, so a wrong answer with a high score always gets a gradient.

    Args:
        scores (torch.Tensor): Scores of shape :obj:`[B, N]`.
        target (torch.Tensor): Answers, shape :obj:`[B]`.
        loss (str, optional): :obj:`"nll"` or :obj:`"bce"`.
            (default: :obj:`"nll"`)
        eps (float, optional): Clamping constant. (default: :obj:`1e-20`)
        max_score (float, optional): The largest score the model gives,
            :math:`s_{\max}` (its rank :math:`T`), for :obj:`"bce"`.
            (default: :obj:`1.`)
    """
    if loss == 'nll':
        return nll_loss(scores.gather(1, target.view(-1, 1)).squeeze(1), eps)
    if loss == 'bce':
        eps = max(eps, 1e-7)  # 1 - eps must differ from 1 in float32
        s = (scores / max_score).clamp(eps, 1 - eps)
        onehot = torch.zeros_like(s).scatter_(1, target.view(-1, 1), 1.)
        bce = -(onehot * s.log() + (1 - onehot) * (1 - s).log())
        return bce.sum(dim=1).mean()
    raise ValueError(f"'loss' must be one of {LOSSES}, got {loss!r}")


def nll_loss(target_score: Tensor, eps: float = 1e-20) -> Tensor:
    r""":math:`-\log \max(s_t, \epsilon)` averaged over the batch, from the
    answers' scores alone (shape :obj:`[B]`)."""
    return -torch.log(target_score.clamp(min=eps)).mean()


@dataclass
class FitResult:
    r"""What :func:`fit` returns.

    Attributes:
        history (List[Dict]): Per epoch: :obj:`epoch`, :obj:`loss` (mean
            training loss), :obj:`seconds` (training time of the epoch),
            :obj:`valid_mrr` (filtered, realistic ties).
        best_epoch (int): The epoch whose weights were restored (the last
            one where the KG has no validation triples).
        best_valid_mrr (float): Its validation MRR (:obj:`nan` without
            validation triples, or where no epoch was completed).
        steps (int): The optimisation steps taken in all (a resumed run's
            included); :obj:`0` where a :obj:`time_budget` ended before the
            first one (the weights are the untrained ones).
    """
    history: List[Dict] = field(default_factory=list)
    best_epoch: int = 0
    best_valid_mrr: float = float('nan')
    steps: int = 0


def fit(
    model: torch.nn.Module,
    data: Any,
    config: Optional[TrainConfig] = None,
    *,
    device: Optional[torch.device] = None,
    eval_batch_size: int = 256,
    progress: bool = True,
    progress_interval: float = 30.0,
    log: Optional[Callable[[str], None]] = log_line,
    checkpoint: Optional[str] = None,
    resume: bool = False,
    overwrite: bool = False,
    allow_config_change: bool = False,
    adapt_threads: bool = True,
    callback: Optional[Callable[[int, int], None]] = None,
    max_steps: Optional[int] = None,
    time_budget: Optional[float] = None,
    **settings,
) -> FitResult:
    r"""Trains a rule reasoner on a knowledge graph and restores the weights
    of the epoch with the best filtered validation MRR (realistic ties).
    A KG without validation triples trains for all :obj:`epochs` and keeps
    the last weights, with a warning.

    In a KG with node types (from a :obj:`HeteroData`) the validation
    ranks each answer among the entities of its type, as
    :func:`~pyg_degreembed.compute_ranks` does.

    The training queries are the :obj:`train` triples in both directions,
    shuffled every epoch.  Each query is answered on the observed graph
    (:obj:`data.edge_index`, i.e. facts and train with inverses) without its
    own edge and that edge's inverse.  Adam, gradient-norm clipping, early
    stopping after :obj:`patience` epochs without improvement.

    With the same seed, data, device and number of CPU threads, training is
    deterministic: on the CPU, two runs give bit-identical weights and
    metrics, and so does a run interrupted and resumed from its checkpoint.
    The thread guard (:obj:`adapt_threads`) changes the number of threads
    when other processes compete for the cores, and with it the order of
    some float sums (differences in the 7th digit): turn it off for
    bit-identical reruns on a shared machine.

    In a :mod:`torch.distributed` job (see
    :mod:`pyg_degreembed.training.distributed`)
    the global batches are split between the processes, gradients summed,
    validation sharded, and only process 0 logs and writes checkpoints.

    Args:
        model (torch.nn.Module): A :class:`~pyg_degreembed.RuleReasoner`.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads (the
            library's :obj:`Data`, PyG's KG datasets, :obj:`HeteroData`).
        config (TrainConfig, optional): The training settings (epochs,
            batch size, learning rates, weight decay, patience, clipping,
            loss, seed), validated once, recorded in the checkpoint and
            compared on resume. (default: :obj:`TrainConfig()`)
        **settings: Fields of :class:`TrainConfig` that override
            :obj:`config`'s, e.g. :obj:`fit(model, data, epochs=5)`.
        device (torch.device, optional): Where to train. (default: the
            model's device)
        eval_batch_size (int, optional): Queries per validation batch.
            (default: :obj:`256`)
        progress (bool, optional): Report progress within epochs and
            validations: a tqdm bar on a terminal, else a line to
            :obj:`log` every :obj:`progress_interval` seconds (batches done,
            queries/s, running loss, ETA; see
            :class:`~pyg_degreembed.training.progress.Progress`).
            (default: :obj:`True`)
        progress_interval (float, optional): Seconds between two progress
            lines when the output is not a terminal. (default: :obj:`30.0`)
        log (callable, optional): Called with one line per epoch (and the
            progress lines). (default: :func:`print` with flush)
        checkpoint (str, optional): A file to write after every epoch
            (atomically), holding the model, the optimizer, the best
            weights, the history and the RNG states; see
            :mod:`pyg_degreembed.training.checkpoint`. (default: :obj:`None`)
        resume (bool, optional): Continue from :obj:`checkpoint` if it
            exists; refused if the checkpoint's KG, model or training
            settings (its :class:`TrainConfig`, :obj:`epochs` aside)
            differ. (default: :obj:`False`)
        overwrite (bool, optional): Replace an existing :obj:`checkpoint`
            when not resuming (else that is refused). (default:
            :obj:`False`)
        allow_config_change (bool, optional): Resume even with other
            training settings. (default: :obj:`False`)
        adapt_threads (bool, optional): Move to one CPU thread while
            another process competes for the cores and that is at least
            1.5 times as fast, measured on a probe batch (see
            :class:`~pyg_degreembed.training.threads.ThreadGuard`; logged; on
            an idle
            machine nothing changes). (default: :obj:`True`)
        callback (callable, optional): Called as :obj:`callback(epoch,
            step)` after every optimisation step. (default: :obj:`None`)
        max_steps (int, optional): End training after this many
            optimisation steps in all (counted over resumed runs too).
            (default: :obj:`None`, no limit)
        time_budget (float, optional): End training after the step that
            passes this many seconds of this call (its set-up, the memory
            and thread probes, included). (default: :obj:`None`, no
            limit)

    Training that ends on :obj:`max_steps` or :obj:`time_budget` in the
    middle of an epoch keeps the weights of the best epoch validated so far
    (the current ones if no epoch was completed), and the checkpoint holds
    the point where it ended: resuming with a larger limit continues the
    epoch where it stopped, as if it had never stopped.  SIGINT and SIGTERM
    end it the same way, then raise :class:`TrainingInterrupted`.  The
    model is returned in eval mode.
    """
    called = time.perf_counter()
    config = _config(config, settings)
    check_positive_ints(eval_batch_size=eval_batch_size)
    if not progress_interval >= 0:
        raise ValueError(f"'progress_interval' must be at least 0, got "
                         f'{progress_interval}')
    if max_steps is not None:
        check_positive_ints(max_steps=max_steps)
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"'time_budget' must be a positive number of "
                         f'seconds, got {time_budget}')
    if resume and checkpoint is None:
        raise ValueError("'resume' needs a 'checkpoint' path")
    if checkpoint is not None:
        check_writable(checkpoint, 'checkpoint')
    device = torch.device(device) if device is not None else \
        next(model.parameters()).device
    model.to(device)
    run = _Run(model, data, torch.optim.Adam(
        parameter_groups(model, config.edge_weight_lr,
                         config.edge_weight_decay), lr=config.lr),
               torch.Generator().manual_seed(config.seed), config)
    if run.kg.train_edge_type.numel() == 0:
        raise ValueError('The KG has no training triples')
    if device.type == 'cpu':
        check_memory(training_estimate(model, run.graph, run.queries,
                                       config.batch_size)(config.batch_size),
                     f'Training with batch_size={config.batch_size} and '
                     f'num_steps={model.num_steps} on {run.kg.num_nodes} '
                     'entities')
    broadcast_parameters(model)
    run.guard = ThreadGuard(
        training_probe(model, run.graph,
                       *(q[:config.batch_size] for q in run.queries)),
        enabled=adapt_threads and device.type == 'cpu',
        log=log if run.is_main else None)
    with exclusive(checkpoint) if checkpoint is not None and run.is_main \
            else nullcontext(), run.guard:
        if checkpoint is not None:  # tested under the lock
            check_new_checkpoint(checkpoint, resume, overwrite)
        run.limit = _Limit(max_steps, time_budget, called)
        with StopOnSignal(run.limit) as run.signals:
            return _fit_epochs(run, device, eval_batch_size, progress,
                               progress_interval, log, checkpoint, resume,
                               allow_config_change, callback)


class TrainingInterrupted(KeyboardInterrupt):
    r"""SIGINT or SIGTERM ended :func:`fit`: the run was saved where it
    stood (as a :obj:`max_steps` stop saves it) and :obj:`resume=True` goes
    on from there.  :obj:`signum` is the signal."""
    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class _StopNow(Exception):
    r"""A signal during validation: the epoch's training is saved, its
    validation runs again on resuming."""


class StopOnSignal:
    r"""While active (in the main thread), SIGINT and SIGTERM ask the run
    to stop: the signal is recorded in :obj:`limit` (whose
    :meth:`_Limit.reached` the training steps test), or, within
    :meth:`now`, raised at once as :class:`_StopNow`.  A second signal
    raises :class:`KeyboardInterrupt` at once.  The previous handlers come
    back on exit."""
    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, limit: '_Limit'):
        self.limit, self.immediate = limit, False
        self.previous: Dict[int, Any] = {}

    def __enter__(self) -> 'StopOnSignal':
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame):
        if self.limit.signal is not None:
            raise KeyboardInterrupt()
        self.limit.signal = signum
        self.limit.reason = signal.Signals(signum).name
        if self.immediate:
            raise _StopNow()

    @contextmanager
    def now(self) -> Iterator[None]:
        r"""Within the block a signal interrupts it at once."""
        self.immediate = True
        try:
            if self.limit.signal is not None:
                raise _StopNow()
            yield
        finally:
            self.immediate = False


class TrainingDiverged(ValueError):
    r"""The weights became infinite or NaN in a training step: training
    stops at once (the checkpoint keeps the last one saved)."""


def check_new_checkpoint(path: str, resume: bool, overwrite: bool):
    r"""Refuses to replace the existing checkpoint :obj:`path` unless the
    run resumes it or overwrites it; tested while the lock of :obj:`path`
    is held (:func:`~pyg_degreembed.training.files.exclusive`), so that of
    two runs started together the second sees the first's file."""
    if os.path.exists(path) and not resume and not overwrite:
        raise CheckpointError(
            f'{path} exists; resume from it (--resume, resume=True) or '
            'replace it (--overwrite, overwrite=True)')


def _config(config: Optional[TrainConfig], settings: dict) -> TrainConfig:
    # The settings of a run: config with the keyword overrides.
    unknown = set(settings) - {f.name for f in fields(TrainConfig)}
    if unknown:
        raise TypeError(f'fit() got unexpected arguments {sorted(unknown)} '
                        f'(the settings are the fields of TrainConfig: '
                        f"{', '.join(f.name for f in fields(TrainConfig))})")
    if config is not None and not isinstance(config, TrainConfig):
        raise TypeError(f"'config' must be a TrainConfig, got "
                        f'{type(config).__name__}')
    return replace(config or TrainConfig(), **settings)


def parameter_groups(model: torch.nn.Module,
                     edge_weight_lr: Optional[float] = None,
                     edge_weight_decay: float = 0.):
    r"""The model's parameter groups for the optimizer: one, or the edge
    weight's parameters apart with learning rate :obj:`edge_weight_lr`
    (:obj:`None`: the optimizer's) and weight decay
    :obj:`edge_weight_decay`."""
    edge_weight = getattr(model, 'edge_weight', None)
    if edge_weight is None or (edge_weight_lr is None and
                               edge_weight_decay == 0):
        return [{'params': list(model.parameters())}]
    own = {id(p) for p in edge_weight.parameters()}
    group = {'params': list(edge_weight.parameters()),
             'weight_decay': edge_weight_decay}
    if edge_weight_lr is not None:
        group['lr'] = edge_weight_lr
    return [{'params': [p for p in model.parameters() if id(p) not in own]},
            group]


def _optimizer_state_for(optimizer, saved: dict, saved_groups) -> dict:
    r"""The per-parameter state of a saved optimizer, whose parameter groups
    were :obj:`saved_groups`, in the layout of :obj:`optimizer`, with
    :obj:`optimizer`'s hyperparameters (a run resumed with other settings
    trains with them, even where they regroup the parameters)."""
    current = optimizer.state_dict()['param_groups']
    position = {id(p): i for group, ids in zip(optimizer.param_groups,
                                               current)
                for p, i in zip(group['params'], ids['params'])}
    index = {i: position[id(p)] for group, ids in zip(
        saved_groups, saved['param_groups'])
        for p, i in zip(group['params'], ids['params'])}
    return {'state': {index[i]: v for i, v in saved['state'].items()},
            'param_groups': current}


def _fit_epochs(run, device, eval_batch_size, progress, progress_interval,
                log, checkpoint, resume, allow_config_change, callback):
    # The loop over epochs; the training settings are run.settings.
    model, settings = run.model, run.settings
    first_epoch = 1
    if resume and os.path.exists(checkpoint):
        first_epoch = run.resume(checkpoint, device, allow_config_change)
        if log is not None and run.is_main:
            where = f'step {run.partial["step"]} of epoch {first_epoch}' \
                if run.partial is not None else f'epoch {first_epoch - 1}'
            log(f'resumed from {checkpoint} after {where}')

    validate = run.valid.size(1) > 0
    if not validate:
        note = ('no validation triples: early stopping and the choice of '
                'the best epoch are off; training runs all '
                f'{settings.epochs} epochs and keeps the last weights')
        warnings.warn(note)
        if log is not None and run.is_main:
            log(note)

    def reporter(total: int, desc: str) -> Progress:
        return Progress(total, desc, enabled=progress and run.is_main,
                        interval=progress_interval, log=log)

    for epoch in range(first_epoch, settings.epochs + 1):
        mean_loss, seconds = run.train_epoch(
            epoch, settings.batch_size, settings.clip_norm, settings.loss,
            reporter, callback)
        if run.partial is None and validate:
            try:
                with run.signals.now():
                    ranks = rank_queries(
                        model, run.graph, run.valid, run.true_answers,
                        eval_batch_size, progress=lambda total: reporter(
                            total, f'validation {epoch}'),
                        types=answer_types(run.kg))
                assert isinstance(ranks, Ranks)  # a reasoner ranks once
                valid_mrr = ranks.mrr()
            except _StopNow:  # saved as trained, its validation to come
                run.partial = run.last_pass
        if run.partial is not None:  # max_steps, time_budget or a signal
            if not run.result.best_epoch:
                # No epoch to choose from: the current weights are the
                # model's, in memory and in the checkpoint alike.
                run.best_state = _copy_state(model)
            if checkpoint is not None and run.is_main:
                run.save(checkpoint, epoch - 1, False)
            run.result.steps = run.global_step
            if run.global_step == 0 and log is None:
                warnings.warn(f'{run.limit.reason} ended before the first '
                              'training step: the weights are untrained')
            if log is not None and run.is_main:
                kept = f'the weights of epoch {run.result.best_epoch}' \
                    if run.result.best_epoch else 'the untrained weights ' \
                    '(no step taken)' if run.global_step == 0 else \
                    'the current weights (no epoch completed)'
                log(f'stopped at step {run.partial["step"]} of epoch '
                    f'{epoch} ({run.limit.reason}); kept {kept}'
                    + ('; resume from the checkpoint to go on'
                       if checkpoint is not None else ''))
            model.load_state_dict(run.best_state)
            model.eval()
            if run.limit.signal is not None:
                raise TrainingInterrupted(
                    f'stopped by {run.limit.reason} at step '
                    f'{run.partial["step"]} of epoch {epoch}' + (
                        f'; {checkpoint} holds the run: resume it '
                        '(--resume, resume=True) to go on'
                        if checkpoint is not None else ''), run.limit.signal)
            return run.result
        if not validate:
            valid_mrr = float('nan')
        improved = run.record(epoch, mean_loss, seconds, valid_mrr, validate)
        if log is not None and run.is_main:
            log(f'epoch {epoch:3d}  loss {mean_loss:.4f}  '
                f'time {seconds:6.2f}s  valid MRR {valid_mrr:.4f}'
                f'{"  *" if improved and validate else ""}')
        stop = epoch - run.result.best_epoch >= settings.patience
        if checkpoint is not None and run.is_main:
            run.save(checkpoint, epoch, stop)
        if stop:
            break
    model.load_state_dict(run.best_state)
    model.eval()
    run.result.steps = run.global_step
    return run.result


class _Run:
    r"""The state of one :func:`fit` run and its steps: an epoch, the
    bookkeeping after validation, saving and resuming."""
    def __init__(self, model, data, optimizer, generator,
                 settings: TrainConfig):
        device = next(model.parameters()).device
        self.model, self.optimizer = model, optimizer
        self.generator, self.settings = generator, settings
        self.kg = as_kg(data)
        self.kg_info = kg_summary(self.kg)
        self.graph = model.graph(data)
        self.true_answers = TrueAnswers(all_triples(self.kg),
                                        self.kg.num_nodes,
                                        self.kg.num_relations).to(device)
        self.queries = tuple(t.to(device) for t in both_directions(
            split_triples(self.kg, 'train'), self.kg.num_relations))
        self.valid = split_triples(self.kg, 'valid')
        self.num_processes, self.process = world()
        self.is_main = self.process == 0
        self.result = FitResult()
        self.best_state = _copy_state(model)
        # Set by fit():
        self.guard: ThreadGuard
        self.limit: _Limit
        self.signals: StopOnSignal
        self.global_step = 0  # optimisation steps, resumed runs included
        self.partial: Optional[dict] = None  # where a limit ended an epoch

    def train_epoch(self, epoch: int, batch_size: int, clip_norm, loss: str,
                    reporter, callback) -> Tuple[float, float]:
        r"""One pass over the shuffled training queries (or the rest of a
        pass that was ended by the run's limit); returns the mean loss and
        the seconds it took.  Where the limit ends it,
        :obj:`self.partial` records where (else it is :obj:`None`)."""
        model, optimizer = self.model, self.optimizer
        head, relation, tail = self.queries
        device = head.device
        model.train()
        start = time.perf_counter()
        resumed, self.partial = self.partial, None
        if resumed is not None:  # the shuffle of the ended pass, again
            self.generator.set_state(resumed['shuffle_rng'])
        shuffle_rng = self.generator.get_state()
        perm = torch.randperm(head.numel(),
                              generator=self.generator).to(device)
        total, count, done = 0., 0, 0
        if resumed is not None:
            total, count, done = (resumed['loss_total'], resumed['count'],
                                  resumed['step'])
        batches = perm.split(batch_size)
        progress = reporter(len(batches) - done, f'epoch {epoch}')
        for step, index in enumerate(batches, start=1):
            if step <= done:
                continue
            if self._limit_reached():
                self.partial = {'epoch': epoch, 'step': step - 1,
                                'shuffle_rng': shuffle_rng,
                                'loss_total': total, 'count': count}
                break
            # With several processes, each takes a share of the global
            # batch; its loss is scaled so that the summed gradients equal
            # the gradient of the global batch's mean loss.
            step_start = time.perf_counter()
            share = index[self.process::self.num_processes]
            h, q, t = head[share], relation[share], tail[share]
            optimizer.zero_grad()
            value = None
            if share.numel() > 0:
                if loss == 'nll':  # only the answers' scores are needed
                    batch_loss = nll_loss(model.score(self.graph, h, q, t),
                                          model.eps)
                else:
                    batch_loss = rule_loss(
                        model(self.graph, h, q, remove_tail=t), t, loss,
                        model.eps, max_score=model.rank)
                (batch_loss * (share.numel() / index.numel())).backward()
                value = float(batch_loss.detach())
                total += value * share.numel()
            all_reduce_gradients(model)
            if clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            # The same weights in every process: all stop together.
            if not math.isfinite(float(sum(p.detach().sum() for p in
                                           model.parameters()))):
                raise TrainingDiverged(
                    f'training diverged: the weights became infinite or NaN '
                    f'at step {step} of epoch {epoch} (loss {value}); they '
                    f'are not kept: try a smaller learning rate than '
                    f'lr={optimizer.defaults["lr"]:g}')
            count += index.numel()
            progress.update(index.numel(), value)
            self.guard.step(time.perf_counter() - step_start)
            self.global_step += 1
            if callback is not None:
                callback(epoch, step)
        progress.close()
        seconds = time.perf_counter() - start
        # Where the pass stands once trained (saved if a signal comes during
        # its validation).
        self.last_pass = {'epoch': epoch, 'step': len(batches),
                          'shuffle_rng': shuffle_rng, 'loss_total': total,
                          'count': count}
        return all_reduce_number(total) / max(count, 1), seconds

    def _limit_reached(self) -> bool:
        reached = self.limit.reached(self.global_step)
        if self.num_processes > 1:
            # Clocks and signals differ between processes: all stop if one
            # does.
            reached = all_reduce_number(float(reached), 'max') > 0
            if reached and not self.limit.reason:
                self.limit.reason = 'another process stopped'
        return reached

    def record(self, epoch: int, loss: float, seconds: float,
               valid_mrr: float, validated: bool = True) -> bool:
        r"""Adds the epoch to the history; keeps the weights if the
        validation MRR improved (returned), or of every epoch where there
        is no validation."""
        self.result.history.append({'epoch': epoch, 'loss': loss,
                                    'seconds': seconds,
                                    'valid_mrr': valid_mrr})
        improved = not validated or not self.result.best_epoch or \
            valid_mrr > self.result.best_valid_mrr
        if improved:
            self.result.best_epoch = epoch
            self.result.best_valid_mrr = valid_mrr
            self.best_state = _copy_state(self.model)
        return improved

    def save(self, path: str, epoch: int, stopped: bool):
        r"""Writes the checkpoint after :obj:`epoch`."""
        save_checkpoint(path, {
            'format': FORMAT,
            'library_version': __version__,
            'model': model_spec(self.model),
            'kg': self.kg_info,
            'fit': self.settings.to_dict(),
            'state': {
                'model': self.model.state_dict(),
                'optimizer': self.optimizer.state_dict(),
                'best_model': self.best_state,
                'epoch': epoch,
                'stopped': stopped,
                'history': self.result.history,
                'best_epoch': self.result.best_epoch,
                'best_valid_mrr': self.result.best_valid_mrr,
                'torch_rng': torch.get_rng_state(),
                'shuffle_rng': self.generator.get_state(),
                'global_step': self.global_step,
                'partial': self.partial,
            },
        })

    def resume(self, path: str, device, allow_config_change: bool) -> int:
        r"""Restores the run from a checkpoint; returns the first epoch
        still to train."""
        payload = load_checkpoint(path, map_location=device)
        check_kg(payload, self.kg, path)
        if payload['model'] != model_spec(self.model):
            raise CheckpointError(
                f"{path} holds a model {payload['model']}, not this one "
                f'{model_spec(self.model)}')
        trained = TrainConfig.from_dict(payload['fit'])
        changed = self.settings.changes(trained)
        if changed and not allow_config_change:
            raise CheckpointError(
                f"{path} was trained with other settings ({'; '.join(changed)}"
                '); resume with the same ones, or allow it '
                '(--allow-config-change, allow_config_change=True)')
        state = payload['state']
        self.model.load_state_dict(state['model'])
        self.optimizer.load_state_dict(_optimizer_state_for(
            self.optimizer, state['optimizer'], parameter_groups(
                self.model, trained.edge_weight_lr,
                trained.edge_weight_decay)))
        self.best_state = state['best_model']
        self.result = FitResult(list(state['history']), state['best_epoch'],
                                state['best_valid_mrr'])
        self.generator.set_state(state['shuffle_rng'])
        torch.set_rng_state(state['torch_rng'])
        self.global_step = state.get('global_step', 0)
        self.partial = state.get('partial')
        if state['stopped']:
            return self.settings.epochs + 1
        return state['epoch'] + 1


class _Limit:
    r"""When :func:`fit` ends training early: after :obj:`max_steps`
    optimisation steps in all, or :obj:`time_budget` seconds after
    :obj:`start` (a :func:`time.perf_counter` reading)."""
    def __init__(self, max_steps: Optional[int],
                 time_budget: Optional[float], start: float):
        self.max_steps, self.time_budget = max_steps, time_budget
        self.start = start
        self.reason = ''
        #: The signal that asked the run to stop (see StopOnSignal).
        self.signal: Optional[int] = None

    def reached(self, global_step: int) -> bool:
        if self.signal is not None:
            pass  # the reason is the signal's name
        elif self.max_steps is not None and global_step >= self.max_steps:
            self.reason = f'max_steps={self.max_steps}'
        elif self.time_budget is not None and \
                time.perf_counter() - self.start >= self.time_budget:
            self.reason = f'time_budget={self.time_budget:g}s'
        return bool(self.reason)


def kg_summary(data: Data) -> dict:
    r"""What a checkpoint records about its training KG."""
    return {'num_nodes': int(data.num_nodes),
            'num_relations': int(data.num_relations),
            'relation_names': list(data.relation_names),
            'source': getattr(data, 'source', None),
            'fingerprint': kg_fingerprint(data)}


def _copy_state(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
