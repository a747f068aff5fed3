"""The published numbers the report puts beside ours, with their provenance tags.

Provides :data:`PAPER_ROWS` (what the paper says about each of our configurations) and
:data:`PAPER_TABLES` (the paper's result tables as data).  Tags, as in
docs/paper-facts.md: [T] from the paper text; [S] from two or more secondary summaries;
[G] NVIDIA's Mixed Precision Training guide.  Imports nothing.
"""

from __future__ import annotations

__all__ = ["CITATION", "DAS_CLAIM", "PAPER_CLAIMS", "PAPER_NATURAL", "PAPER_ROWS",
           "PAPER_TABLES"]

CITATION = ("Micikevicius et al., \"Mixed Precision Training\", ICLR 2018 (arXiv:1710.03740); "
            "Das et al., \"Mixed Precision Training of CNNs using Integer Operations\", ICLR 2018 "
            "(arXiv:1802.00930)")

#: configuration key -> what the papers report for the same recipe (short, for a table cell)
PAPER_ROWS = {
    "fp32": "baseline (all tables)",
    "o3": "Fig. 2a [T]: fp16 weights updated directly lose 80% relative accuracy (Mandarin "
          "speech)",
    "master_noscale": "Table 2 [S]: Multibox SSD diverges without scaling; Faster R-CNN 68.6 vs "
                      "69.1 fp32 (VOC07 mAP)",
    "static": "Table 2 [S]: SSD 77.1 with scale 8 vs 76.9 fp32; bigLSTM matches fp32 with 128",
    "static_3": "Fig. 3 [S][G]: a scale of 8 is enough to match fp32 (SSD)",
    "static_8": "paper: constant scales from 8 to 32K; bigLSTM [S] matches fp32 with 128",
    "static_15": "Fig. 3 [S][G]: 32K recovers all but 0.1% of SSD's values without overflow",
    "static_24": "above the paper's largest scale (32K)",
    "dynamic": "not in the paper (PyTorch GradScaler rule); paper used constants 8..32K",
    "deepspeed": "not in the paper (DeepSpeed rule, hysteresis 2)",
    "lognormal": "not in the paper (OpenSeq2Seq LogMax rule)",
    "o1": "not in the paper (apex O1: op lists, fp32 weights)",
    "bf16": "not in the paper (bf16 has fp32's exponent range: no scaling)",
    "dfp16": "Das et al. [S]: ResNet-50 top-1 75.77 (DFP-16) vs 75.70 (FP32)",
    "tc_ideal": "Table 1 [T]: fp16 with fp32 accumulation matches fp32 (ResNet-50 76.04 vs "
                "75.92)",
    "tc_v100": "Table 1 [T] (V100 hardware): matches fp32",
    "nomaster": "Fig. 2a [T]: fp16 weights updated directly lose 80% relative accuracy",
    "nomaster_sr": "not in the paper (stochastic rounding of the 16-bit update)",
    "master": "Fig. 2a [T]: with an fp32 master copy, matches fp32",
    "tc_fp16acc": "the paper's technique 3 exists because fp16 accumulation loses accuracy "
                  "[T, qualitative]",
}

#: the paper's tables, for a reference section of the report
PAPER_TABLES = {
    "Table 1 [T] ILSVRC12 top-1 (fp32 / mixed precision, no loss scaling)": [
        ("AlexNet", "56.77", "56.93"), ("VGG-D", "65.40", "65.43"),
        ("GoogLeNet", "68.33", "68.43"), ("Inception v2", "70.03", "70.02"),
        ("Inception v3", "73.85", "74.13"), ("ResNet-50", "75.92", "76.04")],
    "Table 2 [S] VOC07 mAP (fp32 / MP no scaling / MP with scaling)": [
        ("Faster R-CNN", "69.1", "68.6 / 69.7"), ("Multibox SSD", "76.9", "diverges / 77.1")],
    "Table 3 [S] DeepSpeech2 CER (fp32 / mixed precision)": [
        ("English", "2.20", "1.99"), ("Mandarin", "15.82", "15.01")],
}

#: the two effects the report must show or explain
PAPER_CLAIMS = {
    "master_weights": (
        "Updating fp16 weights directly loses every update smaller than 2^-11 of the weight "
        "(fp16 has 10 fraction bits); Fig. 2a [T]: 80% relative accuracy lost on a Mandarin "
        "speech model, while an fp32 master copy matches fp32."),
    "underflow": (
        "Fig. 2b [T]: about 5% of weight-gradient values have exponents below -24 and become "
        "zero in fp16. Fig. 3 [S][G]: 67% of SSD activation-gradient values are zero; converted "
        "to fp16, 31% more become zero, and training diverges."),
    "window": (
        "Fig. 3 [S][G]: for the SSD activation gradients a loss scale of 8 (3 exponents) is "
        "enough to match fp32, and 32K (15 exponents) recovers all but 0.1% of the values "
        "without overflow; the paper used constant scales from 8 to 32K."),
}

#: Das et al. in one sentence, with its tags (docs/paper-facts.md).  The paper's own chain
#: length is not quoted here: the team's notes (docs/dfp16.md) record only that it bounds the
#: int32 chain and flushes partial sums to fp32, optionally shifting the inputs right.
DAS_CLAIM = ("Das et al. [T abstract]: INT16 products accumulated into INT32 with methods to "
             "handle INT32 accumulator overflow (bounded int32 chains whose partial sums are "
             "converted to FP32, docs/dfp16.md); [S] ResNet-50 top-1 75.77 (DFP-16) vs 75.70 "
             "(FP32).")

#: the paper's natural-scale numbers, beside ours in the natural-scale table (shares)
PAPER_NATURAL = {
    "weight_grad": {"below": (0.05, "Fig. 2b [T]: about 5% of weight-gradient values below "
                                    "2^-24 (all layers, Mandarin speech model)")},
    "activation_grad": {"zero": (0.668, "Fig. 3 [S][G]: 66.8% of SSD activation-gradient "
                                        "values are exactly zero"),
                        # the guide's sentence does not say which values the 31% is a share of
                        "to_zero_of_all": (0.31, "Fig. 3 [G]: \"when converted to FP16, 31% of "
                                                 "these values become zeros, leaving only 5.3% "
                                                 "as non-zeros\"")},
}
