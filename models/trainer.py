"""Training one configuration: the loop, evaluation, instrumentation, checkpoints and resume.

Provides :class:`Trainer`.  ``Trainer(cfg, run_dir=...)`` builds data, model (under the config's
precision policy), optimizer, mixed precision wrapper and loss scaler; ``fit()`` trains for
``budget.steps`` steps with a tqdm bar (loss, scale, skipped steps) and returns the run's result
dict (history, final numbers, gradient histograms); ``resume()`` restores the last checkpoint.

One step, in the order of the paper's recipe: forward under the policy; the loss (fp32 where the
policy says so); backward seeded with ``scale * loss_multiplier`` (``loss.backward(grad=...)``,
the same as scaling the loss, without rounding the scaled loss itself); the wrapper copies the
gradients to fp32, unscales them, skips on overflow, updates the fp32 masters (or, without
masters, the 16-bit weights directly) and updates the scaler.

What is measured beyond the loss: per step, the share of weight-gradient elements that are
exactly zero, and the share of elements with a non-zero gradient whose stored weight (the master
if there is one) did not change ("updates lost", the paper's 2^-11 argument); at the steps of
``instrument.histogram_every`` / ``histogram_steps``, exponent histograms of weight gradients and
activation gradients (divided by the loss scale, so they are what fp16 would have to hold
unscaled).

Determinism and resume: every random draw comes from seeded generators whose state is saved in
the checkpoint (engine generator, stochastic-rounding counter, batch sampler), so a run resumed
from a checkpoint produces the same bits as one that was never interrupted.  Checkpoints are
written atomically with a checksum (models.checkpoint); Ctrl-C stops the loop and leaves the last
one intact (:meth:`Trainer.interrupt_message` says which step it holds, or that none was saved).

Imports numpy, tqdm, autograd, scalers (via models.build) and models.*.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time

import numpy as np
from tqdm.auto import tqdm

import autograd
import autograd.functional as F
from scalers import LossScaleAtMinimumError

from .build import make_mixed, make_policy, make_scaler
from .atomic import write_atomic
from .checkpoint import load_checkpoint, save_checkpoint
from .config import dumps, resolve_config
from .data import BatchSampler, eval_batches, load_dataset
from .histograms import ExponentHistogram
from .jsonio import json_safe
from .nets import build_model

__all__ = ["RunFailure", "Trainer", "cached_dataset"]

log = logging.getLogger("models.trainer")
_DATA = {}
CHECKPOINT = "checkpoint.ckpt"


def cached_dataset(cfg):
    """The dataset of a resolved config, loaded once per process (reproduce runs many configs
    on the same data)."""
    d = cfg["data"]
    image = cfg["model"]["type"] == "cnn"
    key = (json.dumps(d, sort_keys=True), cfg["seed"], image)
    if key not in _DATA:
        _DATA[key] = load_dataset(d["name"], seed=cfg["seed"], path=d["path"],
                                  test_fraction=d["test_fraction"], image=image, n=d["n"],
                                  dim=d["dim"], classes=d["classes"], spread=d["spread"],
                                  max_chars=d["max_chars"], lowercase=d["lowercase"],
                                  max_train=d["max_train"])
    return _DATA[key]


class RunFailure(RuntimeError):
    """Training cannot go on (a non-finite loss the engine refuses to differentiate, a loss
    scale stuck at its minimum); the run is recorded as failed, not crashed."""


class Trainer:
    """Train one resolved (or raw) config; see the module docstring."""

    def __init__(self, cfg, *, run_dir=None, progress=True, label=None, position=0,
                 leave=False, observer=None):
        self.cfg = resolve_config(cfg)
        # Optional statistics hook (models.repro uses it for per-layer statistics): on the
        # histogram steps, observer.gradients(trainer, step, scale) after backward, and
        # observer.updates(trainer, step, before, nonzero) after an applied step.  None: off.
        # Its state is the observer's own (not saved in checkpoints).
        self.observer = observer
        self.run_dir, self.progress, self.position = run_dir, progress, position
        self.leave = leave  # keep the finished progress bar on screen
        self.label = label or self.cfg["name"]
        c = self.cfg
        autograd.manual_seed(c["seed"])
        self.ds = cached_dataset(c)
        self.lm = self.ds.kind == "lm"
        self.seq_len = c["data"]["seq_len"] if self.lm else None
        self.model = build_model(c["model"], self.ds, seq_len=self.seq_len)
        self.policy = make_policy(c)
        self.model.set_policy(self.policy)
        self.scaler = make_scaler(c)
        self.mixed = make_mixed(c, self.model, self.policy, self.scaler)
        # the wrapper's order: slots (masters) line up with it
        self.params = list(self.mixed.params)
        self.sampler = BatchSampler(self.ds, batch_size=c["data"]["batch_size"],
                                    seed=c["seed"] + 1, seq_len=self.seq_len)
        self.step_no = 0
        self.history = {"step": [], "loss": [], "scale": [], "skipped": [], "grad_zero": [],
                        "lost": [], "eval_step": [], "eval_loss": [], "eval_metric": []}
        if self.policy.recipe is not None:   # fp8 recipe: per GEMM operand and step
            self.history["fp8"] = []          # (autograd.recipes.fp8_stats rows)
        self.hists = {"weight_grad": ExponentHistogram("weight_grad"),
                      "activation_grad": ExponentHistogram("activation_grad")}
        self.lost_counts = [0, 0]       # [lost, non-zero gradient elements] over applied steps
        self.failure = None             # why training stopped early, if it did
        self.wall_s = 0.0
        self.saved_step = None          # the step of the last checkpoint saved or resumed
        self.saved_path = None          # ... and its file (None: none yet)

    # ----- one step -------------------------------------------------------------------------
    def _scale(self):
        return 1.0 if self.scaler is None else float(self.scaler.get_scale())

    def _hist_due(self, step):
        ins = self.cfg["instrument"]
        every = ins["histogram_every"]
        return (every and step % every == 0) or step in ins["histogram_steps"]

    def _loss(self, logits, y):
        with self.policy:
            return F.cross_entropy(logits, y.reshape(-1))

    def train_step(self):
        """One optimizer step; returns (loss, scale, skipped)."""
        step = self.step_no
        x, y = self.sampler.next()
        self.model.train()
        hist = self._hist_due(step)
        self.model.taps = [] if hist else None
        try:
            loss = self._loss(self.model(x), y)
        except ValueError as exc:
            if self.policy.accumulation != "dfp16":
                raise
            # DFP-16 quantizes each GEMM input with one shared exponent: impossible for NaN/Inf
            raise RunFailure(f"forward pass failed at step {step}: {exc}") from None
        loss_v = float(loss.item())
        scale = self._scale()
        seed = scale * self.cfg["precision"]["loss_multiplier"]
        try:
            loss.backward(grad=np.full(loss.shape, seed))
        except ValueError as exc:
            if math.isfinite(loss_v):
                raise
            # e.g. the DFP-16 GEMM cannot choose a shared exponent for NaN/Inf activations
            raise RunFailure(f"loss became {loss_v} at step {step} and the backward pass "
                             f"refused it: {exc}") from None
        if step in self.cfg["instrument"]["inject_overflow_steps"]:
            self._inject_overflow()
        grads = [p.grad for p in self.params]
        nz = [None if g is None else g != 0 for g in grads]
        n_el = sum(g.size for g in grads if g is not None)
        zero_frac = 1.0 - sum(int(m.sum()) for m in nz if m is not None) / max(n_el, 1)
        if hist:
            for g in grads:
                if g is not None:
                    self.hists["weight_grad"].add(np.asarray(g, np.float64) / scale)
            for _, t in self.model.taps:
                if t.grad is not None:
                    self.hists["activation_grad"].add(np.asarray(t.grad, np.float64) / scale)
            if self.observer is not None:
                self.observer.gradients(self, step, scale)
            self.model.taps = None
        track = self.cfg["instrument"]["lost_updates"]
        stored = self._stored()
        if track:
            before = [s.data.copy() for s in stored]
        result = self.mixed.step()
        self.mixed.zero_grad()
        if "fp8" in self.history:
            self.history["fp8"] += autograd.recipes.fp8_stats(self.model, open_step_only=True)
        lost_frac = math.nan
        if track and not result.skipped:
            lost = sum(int((m & (s.data == b)).sum())
                       for m, s, b in zip(nz, stored, before) if m is not None)
            changed_possible = sum(int(m.sum()) for m in nz if m is not None)
            self.lost_counts[0] += lost
            self.lost_counts[1] += changed_possible
            lost_frac = lost / max(changed_possible, 1)
            if hist and self.observer is not None:
                self.observer.updates(self, step, before, nz)
        h = self.history
        h["step"].append(step)
        h["loss"].append(loss_v)
        h["scale"].append(scale)
        h["skipped"].append(bool(result.skipped))
        h["grad_zero"].append(zero_frac)
        h["lost"].append(lost_frac)
        self.step_no += 1
        return loss_v, scale, bool(result.skipped)

    def _stored(self):
        """Where each parameter's value is kept between steps, in self.params order: the fp32
        master where the wrapper keeps one, else the parameter itself."""
        return self.mixed.stored()

    def _inject_overflow(self):
        """A simulated gradient overflow: the first element of the first gradient becomes +Inf
        (gradient arrays are fresh per backward, so nothing else is touched)."""
        for p in self.params:
            if p.grad is not None and p.grad.size:
                g = np.array(p.grad, copy=True)
                g.reshape(-1)[0] = np.inf
                p.grad = g
                return

    # ----- evaluation -----------------------------------------------------------------------
    def evaluate(self):
        """(mean loss, metric) on the held-out split: accuracy, or bits per character."""
        c = self.cfg
        self.model.eval()
        total, n, correct = 0.0, 0, 0
        with autograd.no_grad():
            for x, y in eval_batches(self.ds, batch_size=max(c["data"]["batch_size"], 64),
                                     seq_len=self.seq_len,
                                     max_batches=c["budget"]["eval_batches"]):
                logits = self.model(x)
                loss = self._loss(logits, y)
                k = y.size
                total += float(loss.item()) * k
                n += k
                correct += int((np.argmax(logits.data, axis=-1) == y.reshape(-1)).sum())
        self.model.train()
        mean = total / max(n, 1)
        metric = mean / math.log(2.0) if self.lm else correct / max(n, 1)
        return mean, metric

    def _record_eval(self):
        if self._weights_finite():
            loss, metric = self.evaluate()
        else:
            loss = metric = math.nan
        h = self.history
        h["eval_step"].append(self.step_no)
        h["eval_loss"].append(loss)
        h["eval_metric"].append(metric)
        return loss, metric

    # ----- the loop ---------------------------------------------------------------------------
    def _weights_finite(self):
        return all(np.isfinite(p.data).all() for p in self.params)

    def fit(self):
        """Train to budget.steps (from wherever a resume left off); returns result()."""
        b = self.cfg["budget"]
        every_ckpt = self.cfg["checkpoint"]["every"]
        if self.step_no > b["steps"]:
            # history.json would record a config that asks for fewer steps than were trained
            raise ValueError(f"this run is already at step {self.step_no} (resumed from its "
                             f"checkpoint), beyond budget.steps {b['steps']}; ask for at least "
                             f"{self.step_no} steps (mpemu train --steps)")
        if self.run_dir:
            write_atomic(os.path.join(self.run_dir, "config.json"), dumps(self.cfg) + "\n")
        bar = tqdm(total=b["steps"], initial=self.step_no, desc=self.label, leave=self.leave,
                   disable=not self.progress, position=self.position, dynamic_ncols=True,
                   mininterval=0.5, unit="step")
        t0 = time.perf_counter() - self.wall_s
        try:
            if not self.history["eval_step"]:
                self._record_eval()
            while self.step_no < b["steps"] and self.failure is None:
                try:
                    loss, scale, _ = self.train_step()
                except (LossScaleAtMinimumError, RunFailure) as exc:
                    self.failure = f"stopped at step {self.step_no}: {exc}"
                    log.warning("%s: %s", self.label, self.failure)
                    break
                if not self._weights_finite():
                    self.failure = f"weights became non-finite at step {self.step_no - 1}"
                    log.warning("%s: %s", self.label, self.failure)
                if self.step_no % b["eval_every"] == 0 or self.step_no == b["steps"]:
                    self._record_eval()
                if self.step_no % b["log_every"] == 0:
                    bar.set_postfix(loss=f"{loss:.4g}", scale=f"{scale:g}",
                                    skipped=sum(self.history["skipped"]), refresh=False)
                bar.update(1)
                self.wall_s = time.perf_counter() - t0
                if self.run_dir and every_ckpt and self.step_no % every_ckpt == 0:
                    self.save()
            if self.history["eval_step"][-1] != self.step_no:
                self._record_eval()
        except KeyboardInterrupt:   # the caller says what was saved: interrupt_message()
            bar.close()
            raise
        bar.close()
        self.wall_s = time.perf_counter() - t0
        result = self.result()
        if self.run_dir:
            self.save()
            write_atomic(os.path.join(self.run_dir, "history.json"),
                         json.dumps(json_safe(result), indent=1, allow_nan=False))
        return result

    def result(self):
        h = self.history
        losses = np.asarray(h["loss"], dtype=np.float64)
        tail = losses[-max(1, len(losses) // 10):] if losses.size else np.array([math.nan])
        train_loss = float(np.mean(tail)) if np.isfinite(tail).all() else math.nan
        lost = (self.lost_counts[0] / self.lost_counts[1]) if self.lost_counts[1] else None
        final = {
            "steps": self.step_no, "train_loss": train_loss,
            "eval_loss": h["eval_loss"][-1] if h["eval_loss"] else math.nan,
            "eval_metric": h["eval_metric"][-1] if h["eval_metric"] else math.nan,
            "skipped_steps": int(sum(h["skipped"])), "final_scale": self._scale(),
            "lost_update_fraction": lost,
            "grad_zero_fraction": float(np.mean(h["grad_zero"])) if h["grad_zero"] else None,
            "diverged": bool(self.failure) or not math.isfinite(train_loss),
            "failure": self.failure, "wall_s": self.wall_s,
        }
        hists = {k: v.to_dict() for k, v in self.hists.items() if v.samples}
        return {"name": self.cfg["name"], "label": self.label, "config": self.cfg,
                "metric": "bits per char" if self.lm else "accuracy", "final": final,
                "history": h, "histograms": hists, "policy": str(self.policy)}

    # ----- checkpoints --------------------------------------------------------------------------
    def state_dict(self):
        return {"config": self.cfg, "step": self.step_no, "model": self.model.state_dict(),
                "mixed": self.mixed.state_dict(), "sampler": self.sampler.state_dict(),
                "engine_rng": autograd.get_rng_state(), "history": self.history,
                "hists": {k: v.to_dict() for k, v in self.hists.items()},
                "lost_counts": list(self.lost_counts), "failure": self.failure,
                "wall_s": self.wall_s}

    def load_state_dict(self, state):
        saved = dict(state["config"])
        mine = dict(self.cfg)
        saved_budget, mine_budget = saved.pop("budget"), mine.pop("budget")
        if saved != mine:
            diff = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
            raise ValueError(f"checkpoint was made with a different config (differs in: "
                             f"{', '.join(diff)}); only budget.* may change on resume")
        del saved_budget, mine_budget
        self.model.load_state_dict(state["model"])
        self.mixed.load_state_dict(state["mixed"])
        self.sampler.load_state_dict(state["sampler"])
        rng = state["engine_rng"]
        if "sr_calls" in state:         # checkpoints before autograd.get_rng_state existed
            rng = {"generator": rng, "sr_calls": state["sr_calls"]}
        autograd.set_rng_state(rng)
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.hists = {k: ExponentHistogram.from_dict(v) for k, v in state["hists"].items()}
        self.lost_counts = list(state["lost_counts"])
        self.failure, self.wall_s = state["failure"], float(state["wall_s"])
        self.step_no = int(state["step"])

    def save(self, path=None):
        path = path or os.path.join(self.run_dir, CHECKPOINT)
        out = save_checkpoint(path, self.state_dict())
        self.saved_step, self.saved_path = self.step_no, path
        return out

    def resume(self, path=None):
        """Restore ``path`` (default RUN_DIR/checkpoint.ckpt); returns the step reached."""
        path = path or os.path.join(self.run_dir or ".", CHECKPOINT)
        self.load_state_dict(load_checkpoint(path))
        self.saved_step, self.saved_path = self.step_no, path
        log.info("%s: resumed from %s at step %d", self.label, path, self.step_no)
        return self.step_no

    def interrupt_message(self):
        """What an interruption (Ctrl-C) leaves behind: the step of the checkpoint on disk, or
        that nothing was saved."""
        if self.saved_path is None and not self.run_dir:
            return f"interrupted at step {self.step_no}; nothing was saved (no run directory)"
        if self.saved_path is None:
            every = self.cfg["checkpoint"]["every"]
            when = (f"the first was due at step {every}" if every else
                    "checkpoint.every is 0: only the end of training saves one")
            return (f"interrupted at step {self.step_no}; nothing was saved (no checkpoint "
                    f"yet: {when})")
        return (f"interrupted at step {self.step_no}; the checkpoint of step "
                f"{self.saved_step} is in {self.saved_path} (resume continues from step "
                f"{self.saved_step})")
