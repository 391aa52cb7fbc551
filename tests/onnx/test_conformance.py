#!/usr/bin/env python3
"""test_conformance.py -- fusegen against the ONNX backend test suite.

Collects the reference cases the `onnx` package ships and runs each through
fusegen in CPU emulation (the generated CUDA source compiled for the host):

  node               onnx.backend.test.case.node.collect_testcases(): one
                     operator per model (and the `_expanded` function-body
                     forms), inputs and expected outputs
  pytorch-converted, onnx/backend/test/data/<suite>/<case>/model.onnx with
  pytorch-operator,  test_data_set_*/input_*.pb and output_*.pb
  simple
  light              onnx/backend/test/data/light/light_*.onnx, model-zoo
                     networks whose weights are ConstantOfShape nodes (folded
                     at import); run at their shipped input size on a seeded
                     input and compared with onnxruntime

Outputs are compared element-wise: |got - want| <= 1e-5 + 1e-3 * |want|,
NaN equal to NaN.  Each case ends as

  pass         imported, planned, run, every output within tolerance
  fail         a claimed operator: an import error other than "unsupported
               operator" / "opset", or a plan, compile or run error, or a
               mismatch (the reason is recorded)
  unsupported (form not claimed)
               a claimed operator in a form fusegen does not claim
               (UNCLAIMED_FORMS: element types other than float, int64, int32
               and bool, pooling other than 1-D and 2-D, training mode, a used second output, an
               optional-type input); counted apart, not listed in the
               expectation file
  unsupported  the importer's error names operators (or an opset) fusegen
               does not claim; the error text is the reason

The expectations live in tests/onnx/conformance_expected.txt: the cases
known to pass and the known failures with their reasons.  The run fails when
a case listed as passing does not pass, or when a case fails that is not
listed as a known failure.  A known failure that now passes is reported (run
with --update-expected to record it).  The table by operator is printed and,
with --markdown FILE, written as Markdown (docs/onnx.md publishes it).

Work is shared: a process pool (--jobs, default 2) and the kernel cache
(FUSEGEN_CACHE_DIR; identical kernels compile once).  The collected node
cases are cached as a pickle (--cache-dir, FUSEGEN_CONFORMANCE_CACHE).

Options:
  --light ci|all|none   which light networks run (default ci: the ones in
                        LIGHT_CI, all nine the onnx package ships); the
                        others are imported and planned only (kernel count
                        vs op count)
  --suite S[,S]         only these suites
  -k REGEX              only cases whose id matches
  --markdown FILE       write the tables as Markdown
  --update-expected     rewrite the expectation file from this run
  --jobs N              worker processes (default 2)
  -v                    print every case

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.
"""
import argparse
import collections
import concurrent.futures as cf
import glob
import multiprocessing
import os
import pickle
import re
import subprocess
import sys
import time
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fgapi  # noqa: E402

RTOL, ATOL = 1e-3, 1e-5
DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple", "light")
# Light networks run in emulation in CI: all nine the onnx package ships
# (--light all also runs any other; --light none only imports and plans
# them).  The nine took 218 s on two processes with a cold kernel cache; see
# docs/onnx.md, "Conformance".
LIGHT_CI = ("light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
            "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512")
LIGHT_SIX = ("light_resnet50", "light_squeezenet", "light_shufflenet", "light_inception_v1",
             "light_densenet121", "light_bvlc_alexnet")
EXPECTED = os.path.join(HERE, "conformance_expected.txt")
# Case results in table order; "form" is a claimed operator's case in a form
# fusegen does not claim (UNCLAIMED_FORMS).
STATUSES = ("pass", "fail", "planned", "form", "unsupported")
LABEL = {"pass": "pass", "fail": "fail", "planned": "planned", "form": "unsupported (form not claimed)",
         "unsupported": "unsupported"}


# ---- collecting cases ------------------------------------------------------------

class Case:
    """One conformance case.  datasets: [(inputs, outputs)] of arrays, or a
    directory to read them from (dir), or None (light: onnxruntime on a seeded
    input)."""

    def __init__(self, suite, name, model, datasets=None, dir=None, op=None, run=True):
        self.suite, self.name, self.model, self.datasets, self.dir = suite, name, model, datasets, dir
        self.op, self.run = op, run

    @property
    def id(self):
        return "%s/%s" % (self.suite, self.name)


def node_cases(cache_dir):
    """The node cases (pickled in cache_dir, keyed by the onnx version)."""
    path = os.path.join(cache_dir, "node_cases-onnx-%s.pickle" % onnx.__version__) if cache_dir else None
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [(c.name, c.model.SerializeToString(), c.data_sets) for c in collect_testcases()]
    if path:
        os.makedirs(cache_dir, exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            pickle.dump(cases, f, protocol=4)
        os.replace(path + ".tmp", path)
    return cases


def graph_ops(model_bytes):
    m = onnx.load_from_string(model_bytes)
    return [n.op_type for n in m.graph.node], m


def collect(suites, cache_dir):
    out = []
    if "node" in suites:
        raw = node_cases(cache_dir)
        single = {}
        for name, mb, _ in raw:
            ops, _m = graph_ops(mb)
            if len(ops) == 1:
                single[name] = ops[0]
        for name, mb, ds in raw:
            ops, _m = graph_ops(mb)
            op = single.get(name)
            if op is None:
                base = re.sub(r"_expanded(_ver\d+)?$", "", name)
                op = single.get(base)
            if op is None:
                key = name[5:].replace("_", "").lower()
                cands = sorted({o for o in ops if key.startswith(o.lower())}, key=len, reverse=True)
                op = cands[0] if cands else (ops[-1] if ops else "(none)")
            out.append(Case("node", name, mb, datasets=ds, op=op))
    for suite in ("pytorch-converted", "pytorch-operator", "simple"):
        if suite not in suites:
            continue
        for d in sorted(glob.glob(os.path.join(DATA, suite, "*"))):
            mp = os.path.join(d, "model.onnx")
            if os.path.exists(mp):
                with open(mp, "rb") as f:
                    out.append(Case(suite, os.path.basename(d), f.read(), dir=d, op=suite))
    if "light" in suites:
        for mp in sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx"))):
            name = os.path.basename(mp)[:-5]
            with open(mp, "rb") as f:
                out.append(Case("light", name, f.read(), dir=mp, op="light"))
    return out


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return nh.to_array(t)


def dir_datasets(d):
    """[(inputs, outputs)] from test_data_set_*/input_*.pb, output_*.pb."""
    def num(p):
        return int(re.search(r"_(\d+)\.pb$", p).group(1))
    out = []
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        ins = [read_tensor(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=num)]
        outs = [read_tensor(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=num)]
        out.append((ins, outs))
    return out


# ---- running one case (in a worker process) -----------------------------------------

_LIB = None


def lib():
    global _LIB
    if _LIB is None:
        _LIB = fgapi.Lib(os.environ.get("FUSEGEN_LIB", "build/libfusegen.so"))
    return _LIB


def short(msg, n=240):
    msg = re.sub(r"^[^:]*\.onnx: error: ", "", msg.strip())
    msg = msg.replace("\t", " ").replace("\n", " | ")
    return msg if len(msg) <= n else msg[:n - 3] + "..."


# Forms of claimed operators that fusegen does not claim (docs/onnx.md, "What
# is claimed"): an importer error matching one of these is "unsupported (form
# not claimed: WHY)", counted apart from unclaimed operators.  Anything else a
# claimed operator's case gets wrong is a failure.
UNCLAIMED_FORMS = (
    (r"only (?:1-D and )?2-D (?:global )?pooling is supported", "pooling other than 1-D and 2-D"),
    (r"\((BatchNormalization|Dropout)\): training_mode=1 is not supported", "%s in training mode"),
    (r"\((\w+)\): output (\d+) \('[^']*'\) is used, but only the first output", "%s's output %s used"),
    (r"graph input '[^']*' is not a tensor", "an optional-type or sequence input"),
    (r"graph output '[^']*' is a constant; outputs must be computed", "a graph output that folds to a constant"),
    (r"dimension \d+ is 0; fusegen needs positive sizes", "an empty tensor (a dimension of 0)"),
    (r"\(Cast(?:Like)?\): casts a computed tensor to (\w+); tensors are float", "a cast of a computed tensor to %s"),
    (r"\(LayerNormalization\): its Mean and InvStdDev outputs", "LayerNormalization's Mean / InvStdDev outputs used"),
    (r"\((Resize|Upsample)\): input \d+ \((scales|sizes)\) must be a constant", "%s with %s computed (a graph input; "
                                                                          "claimed: constants)"),
    (r"only (?:1-D and )?2-D transposed convolution is supported", "transposed convolution other than 1-D and 2-D"),
    (r"\(Resize\): antialias=1 is not supported", "Resize with antialias"),
    (r"constant '[^']*' of type (\w+) is used as a tensor", "a %s constant used as a tensor (claimed: float, int64, "
                                                          "int32 and bool)"),
    (r"constant '[^']*' is empty|parts have at least one element \(fusegen tensors have no empty axis\)",
     "an empty tensor (a dimension of 0)"),
    # integer graph inputs are claimed, but not where a shape, axes, pads or
    # starts must be known at load time (output shapes are fixed then)
    (r"\((\w+)\): input '(\w+)' must be a constant \(an initializer or a Constant node\)",
     "%s with '%s' computed (claimed: constants)"),
    (r"\((\w+)\): input '(\w+)' is computed; only constant \w+ are supported", "%s with '%s' computed (claimed: "
                                                                               "constants)"),
    (r"\((Dropout)\): (training_mode) must be a constant", "%s with '%s' computed (claimed: constants)"),
    (r"\(GatherND\): (input 'indices' must be a constant|batch_dims other than 0)", "GatherND with computed indices "
                                                                                    "or batch_dims (claimed: constant "
                                                                                    "indices, batch_dims 0)"),
    (r"Div of computed (\w+) tensors is not supported", "integer Div (%s) of computed tensors"),
    (r"has element type (\w+); (?:in|out)puts must be float, double, float16, bfloat16, int64", "element type %s "
                                                                                              "(claimed: float "
                                                                                              "types, int64, "
                                                                                              "int32, bool)"),
)


def unclaimed_form(text):
    """The reason a form is not claimed, or None."""
    for pat, why in UNCLAIMED_FORMS:
        m = re.search(pat, text)
        if m:
            return why % m.groups() if "%" in why else why
    return None


def classify_load_error(msgs):
    text = " | ".join(short(m, 1000) for m in msgs)
    first = short(msgs[0]) if msgs else "error"
    if len(msgs) == 1 and ("unsupported operator" in text or re.search(r"opset \d+ is not supported", text) or
                           "imports no opset of the default ONNX domain" in text):
        return "unsupported", first
    why = unclaimed_form(text)
    if why and all(unclaimed_form(short(m, 1000)) for m in msgs):
        return "form", "form not claimed: %s (%s)" % (why, first)
    return "fail", "import: " + first


def compare(got, want):
    """None when got matches want (shapes, then values); else the reason."""
    want = np.asarray(want)
    if want.dtype == object or want.dtype.kind in "USO":
        return "expected output of type %s" % want.dtype
    g = np.asarray(got, dtype=np.float64)
    w = want.astype(np.float64)
    if g.shape != w.shape:
        if g.size == w.size and w.ndim == 0:
            g = g.reshape(w.shape)   # rank-0 tensors are [1] in fusegen
        else:
            return "shape %s, expected %s" % (list(g.shape), list(w.shape))
    ok = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
    if ok.all():
        return None
    bad = int((~ok).sum())
    d = np.abs(g - w)
    d[np.isnan(d)] = np.inf
    j = int(np.argmax(np.where(ok, -1, d)))
    return "%d of %d values differ (worst: got %.6g, expected %.6g)" % (bad, w.size, g.flat[j], w.flat[j])


def light_datasets(case):
    m = onnx.load_from_string(case.model)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(20261201)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    return [(list(feeds.values()), want)]


def run_case(case):
    """A result dict: id, status, reason, kernels, ops, seconds."""
    t0 = time.time()
    r = {"id": case.id, "suite": case.suite, "op": case.op, "status": "fail", "reason": "", "kernels": None,
         "ops": None, "seconds": 0.0}
    L = lib()
    try:
        g = L.load(data=case.model)
    except fgapi.FusegenError as e:
        r["status"], r["reason"] = classify_load_error(e.messages)
        r["seconds"] = time.time() - t0
        return r
    try:
        if not case.run:
            kernels, ops = fgapi.plan_counts(L, g)
            r.update(status="planned", kernels=kernels, ops=ops, reason="imported and planned, not run (--light all runs it)")
            return r
        if case.suite == "light":
            datasets = light_datasets(case)
        elif case.datasets is None:
            datasets = dir_datasets(case.dir)
        else:
            datasets = case.datasets
        if not datasets:
            r["reason"] = "no test data sets"
            return r
        for k, (ins, outs) in enumerate(datasets):
            # numpy scalars as arrays; TensorProto data (the cast cases) through numpy_helper
            ins = [np.asarray(a) if isinstance(a, np.generic) else
                   nh.to_array(a) if isinstance(a, onnx.TensorProto) else a for a in ins]
            outs = [np.asarray(a) if isinstance(a, np.generic) else
                    nh.to_array(a) if isinstance(a, onnx.TensorProto) else a for a in outs]
            if any(not isinstance(a, np.ndarray) for a in ins + outs):
                r["reason"] = "data set %d holds sequences or optionals, which the runner does not feed" % k
                return r
            got, kernels, ops = fgapi.run_ordered(L, g, ins)
            r["kernels"], r["ops"] = kernels, ops
            if len(got) != len(outs):
                r["reason"] = "%d outputs, expected %d" % (len(got), len(outs))
                return r
            for j, (a, w) in enumerate(zip(got, outs)):
                why = compare(a, w)
                if why:
                    r["reason"] = "output %d: %s" % (j, why)
                    return r
        r["status"] = "pass"
    except fgapi.FusegenError as e:
        r["reason"] = short(e.messages[0] if e.messages else str(e))
    except Exception as e:  # a runner problem on this case is a failure, never a skip
        r["reason"] = "runner: %s: %s" % (type(e).__name__, short(str(e)))
    finally:
        L.free_graph(g)
        r["seconds"] = time.time() - t0
    return r


# ---- the pool -------------------------------------------------------------------------

def run_all(cases, jobs, verbose):
    """Runs cases on a pool of jobs processes; a case that kills its worker is
    a failure (run again alone to name it)."""
    results, pending = {}, list(cases)
    ctx = multiprocessing.get_context("fork")
    alone = False
    while pending:
        retry = []
        with cf.ProcessPoolExecutor(max_workers=1 if alone else jobs, mp_context=ctx) as ex:
            futs = {ex.submit(run_case, c): c for c in pending}
            for f in cf.as_completed(futs):
                c = futs[f]
                try:
                    r = f.result()
                except cf.process.BrokenProcessPool:
                    if alone:
                        r = {"id": c.id, "suite": c.suite, "op": c.op, "status": "fail", "kernels": None,
                             "ops": None, "seconds": 0.0, "reason": "the worker process died (crash)"}
                    else:
                        retry.append(c)
                        continue
                results[c.id] = r
                if verbose:
                    print("  %-60s %-11s %6.1fs %s" % (r["id"], r["status"], r["seconds"], r["reason"][:100]),
                          flush=True)
        if alone:
            pending = []
            for c in retry:   # one at a time: a crash names its case
                pending_one = [c]
                with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
                    f = ex.submit(run_case, pending_one[0])
                    try:
                        results[c.id] = f.result()
                    except cf.process.BrokenProcessPool:
                        results[c.id] = {"id": c.id, "suite": c.suite, "op": c.op, "status": "fail",
                                         "kernels": None, "ops": None, "seconds": 0.0,
                                         "reason": "the worker process died (crash)"}
        else:
            pending, alone = retry, True
    return [results[c.id] for c in cases]


# ---- expectations ----------------------------------------------------------------------

def read_expected(path):
    """{case id: (status, reason)} from lines 'pass ID' / 'fail ID REASON'."""
    exp = {}
    if not os.path.exists(path):
        return exp
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if parts[0] not in ("pass", "plan", "fail") or len(parts) < 2 or (parts[0] == "fail" and len(parts) < 3):
                raise SystemExit("%s:%d: expected 'pass<TAB>ID', 'plan<TAB>ID' or 'fail<TAB>ID<TAB>REASON'" %
                                 (path, ln))
            exp[parts[1]] = (parts[0], parts[2] if len(parts) > 2 else "")
    return exp


def write_expected(path, results, stamp, old):
    """Writes the expectations of results; a known failure of old that still
    fails keeps its written reason (a failure's own message otherwise)."""
    with open(path, "w") as f:
        f.write("# ONNX conformance expectations (tests/onnx/test_conformance.py; docs/onnx.md, Conformance).\n"
                "# pass<TAB>case: known to pass; the test fails if it does not.\n"
                "# plan<TAB>case: a light network known to import and plan (run with --light all).\n"
                "# fail<TAB>case<TAB>reason: a known failure of a claimed operator, with its reason.\n"
                "# Cases not listed are unsupported (the importer refuses their operators or opset, or\n"
                "# a form of a claimed operator that is not claimed: UNCLAIMED_FORMS);\n"
                "# a failing case not listed as a known failure fails the test.\n"
                "# Written by --update-expected: %s\n" % stamp)
        for r in sorted(results, key=lambda r: r["id"]):
            if r["status"] == "pass":
                f.write("pass\t%s\n" % r["id"])
            elif r["status"] == "planned":
                f.write("plan\t%s\n" % r["id"])
            elif r["status"] == "fail":
                e = old.get(r["id"])
                f.write("fail\t%s\t%s\n" % (r["id"], e[1] if e and e[0] == "fail" and e[1] else r["reason"]))


def check_expected(results, exp):
    """Problems (strings) that fail the run, and notes."""
    problems, notes = [], []
    seen = {r["id"]: r for r in results}
    for r in results:
        e = exp.get(r["id"])
        if e and e[0] in ("pass", "plan") and r["status"] not in ("pass", "planned"):
            problems.append("%s: listed as %s, now %s: %s" % (r["id"], "passing" if e[0] == "pass" else
                                                               "planning", r["status"], r["reason"]))
        elif r["status"] == "fail" and not (e and e[0] == "fail"):
            problems.append("%s: fails and is not a known failure: %s" % (r["id"], r["reason"]))
        elif r["status"] == "pass" and e and e[0] == "fail":
            notes.append("%s: a known failure now passes (run --update-expected)" % r["id"])
        elif r["status"] == "fail" and e and e[1] != r["reason"]:
            notes.append("%s: fails for another reason now: %s (listed: %s)" % (r["id"], r["reason"], e[1]))
    for cid, e in exp.items():
        if cid not in seen and e[0] == "pass":
            notes.append("%s: listed as passing but not run (filtered, or no longer collected)" % cid)
    return problems, notes


# ---- tables ----------------------------------------------------------------------------

def by_operator(results):
    t = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r["op"].lower()):
        if r["suite"] != "node":
            continue
        row = t.setdefault(r["op"], {"pass": 0, "fail": 0, "form": 0, "unsupported": 0})
        row[r["status"]] += 1
    return t


def text_tables(results):
    lines = []
    t = by_operator(results)
    if t:
        lines.append("%-28s %5s %5s %10s %11s" % ("operator (node cases)", "pass", "fail", "not-claim", "unsupported"))
        for op, row in t.items():
            if row["pass"] or row["fail"] or row["form"]:
                lines.append("%-28s %5d %5d %10d %11d" % (op, row["pass"], row["fail"], row["form"],
                                                          row["unsupported"]))
        uns = [op for op, row in t.items() if not row["pass"] and not row["fail"] and not row["form"]]
        lines.append("unsupported only (%d operators): %s" % (len(uns), ", ".join(uns)))
    for suite in SUITES[1:]:
        rs = [r for r in results if r["suite"] == suite]
        if not rs:
            continue
        c = collections.Counter(r["status"] for r in rs)
        lines.append("%s: %s" % (suite, ", ".join("%d %s" % (c[k], LABEL[k]) for k in STATUSES if c[k])))
        for r in rs:
            if r["status"] != "unsupported" or suite == "light":
                ko = "%s/%s" % (r["kernels"], r["ops"]) if r["kernels"] is not None else "-"
                lines.append("  %-44s %-11s %-9s %s" % (r["id"], r["status"], ko, r["reason"][:110]))
    c = collections.Counter(r["status"] for r in results)
    lines.append("total: %d cases: %s" % (len(results), ", ".join("%d %s" % (c[k], LABEL[k]) for k in
                                                                 STATUSES if c[k])))
    return "\n".join(lines)


def unsupported_kind(reason):
    """A short form of an unsupported reason: the opset, or the operators."""
    m = re.match(r"opset (\d+) is not supported", reason)
    if m:
        return "opset %s" % m.group(1)
    ops = re.findall(r"([A-Za-z_.]+) \(node", reason)
    return ", ".join(ops) if ops else reason[:60]


def form_kind(reason):
    """The reason of a form not claimed, without the importer's message."""
    m = re.match(r"form not claimed: (.*?) \(", reason)
    return m.group(1) if m else reason[:60]


def md_escape(s):
    return s.replace("|", "\\|")


def markdown(results, stamp):
    out = ["<!-- written by tests/onnx/test_conformance.py --markdown; %s -->" % stamp, ""]
    c = collections.Counter(r["status"] for r in results)
    out.append("%d cases: %s." % (len(results), ", ".join("%d %s" % (c[k], LABEL[k]) for k in
                                                          STATUSES if c[k])))
    out.append("")
    t = by_operator(results)
    if t:
        out += ["| operator | pass | fail | unsupported (form not claimed) | unsupported |",
                "|---|---:|---:|---:|---:|"]
        for op, row in t.items():
            if row["pass"] or row["fail"] or row["form"]:
                out.append("| %s | %d | %d | %d | %d |" % (op, row["pass"], row["fail"], row["form"],
                                                          row["unsupported"]))
        uns = ["%s (%d)" % (op, row["unsupported"]) for op, row in t.items()
               if not row["pass"] and not row["fail"] and not row["form"]]
        out += ["", "Node cases of operators without any claimed case (unsupported): " + ", ".join(uns) + ".", ""]
        forms = collections.Counter(form_kind(r["reason"]) for r in results
                                    if r["suite"] == "node" and r["status"] == "form")
        if forms:
            out += ["Node cases of claimed operators in forms not claimed (docs/onnx.md, \"What is claimed\"): " +
                    "; ".join("%s (%d)" % (k, n) for k, n in sorted(forms.items(), key=lambda kv: (-kv[1], kv[0]))) +
                    ".", ""]
        fails = [r for r in results if r["suite"] == "node" and r["status"] == "fail"]
        if fails:
            out += ["Failing node cases of claimed operators (the known failures):", "",
                    "| case | reason |", "|---|---|"]
            for r in fails:
                out.append("| %s | %s |" % (r["id"][5:], md_escape(r["reason"])))
            out.append("")
    for suite in SUITES[1:]:
        rs = [r for r in results if r["suite"] == suite]
        if not rs:
            continue
        cc = collections.Counter(r["status"] for r in rs)
        out += ["**%s**: %s." % (suite, ", ".join("%d %s" % (cc[k], LABEL[k]) for k in
                                                  STATUSES if cc[k])), ""]
        shown = [r for r in rs if r["status"] != "unsupported" or suite == "light"]
        if shown:
            out += ["| case | result | kernels / ops | reason |", "|---|---|---|---|"]
        for r in shown:
            ko = "%s / %s" % (r["kernels"], r["ops"] if r["ops"] is not None else "-") if r["kernels"] is not None else ""
            out.append("| %s | %s | %s | %s |" % (r["id"].split("/", 1)[1], r["status"], ko, md_escape(r["reason"])))
        why = collections.Counter(unsupported_kind(r["reason"]) for r in rs if r["status"] == "unsupported")
        if why and suite != "light":
            out += ["", "Unsupported: " + "; ".join("%s (%d)" % (k, n) for k, n in sorted(why.items(),
                                                                                     key=lambda kv: -kv[1])) + "."]
        out.append("")
    return "\n".join(out)


def stamp():
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip()
    except OSError:
        commit = "?"
    return "commit %s, onnx %s, onnxruntime %s, %s" % (commit or "?", onnx.__version__, ort.__version__,
                                                       time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--light", choices=("ci", "all", "none"), default="ci")
    ap.add_argument("--suite", default=",".join(SUITES))
    ap.add_argument("-k", dest="pattern")
    ap.add_argument("--markdown")
    ap.add_argument("--expected", default=EXPECTED)
    ap.add_argument("--update-expected", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache-dir", default=os.environ.get("FUSEGEN_CONFORMANCE_CACHE"))
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args(argv)
    suites = [s for s in a.suite.split(",") if s]
    for s in suites:
        if s not in SUITES:
            ap.error("unknown suite '%s' (%s)" % (s, ", ".join(SUITES)))
    t0 = time.time()
    cases = collect(suites, a.cache_dir)
    if a.pattern:
        cases = [c for c in cases if re.search(a.pattern, c.id)]
    for c in cases:
        if c.suite == "light":
            c.run = a.light == "all" or (a.light == "ci" and c.name in LIGHT_CI)
    t1 = time.time()
    print("conformance: %d cases collected in %.1f s; running on %d processes" % (len(cases), t1 - t0, a.jobs),
          flush=True)
    # the long ones first, so that the pool stays busy to the end
    order = sorted(cases, key=lambda c: (c.suite != "light", c.suite == "node"))
    results = run_all(order, a.jobs, a.v)
    results.sort(key=lambda r: (SUITES.index(r["suite"]), r["id"]))
    print(text_tables(results))
    st = stamp()
    slow = sorted(results, key=lambda r: -r["seconds"])[:5]
    print("slowest: " + ", ".join("%s %.1fs" % (r["id"], r["seconds"]) for r in slow))
    print("conformance: %.1f s (collect %.1f s, run %.1f s)" % (time.time() - t0, t1 - t0, time.time() - t1))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(results, st) + "\n")
        print("wrote " + a.markdown)
    if a.update_expected:
        if a.pattern or len(suites) != len(SUITES):
            raise SystemExit("--update-expected needs the whole run (no -k, no --suite)")
        write_expected(a.expected, results, st, read_expected(a.expected) if os.path.exists(a.expected) else {})
        print("wrote " + a.expected)
        return 0
    exp = read_expected(a.expected)
    problems, notes = check_expected(results, exp)
    for n in notes:
        print("note: " + n)
    for p in problems:
        print("FAIL: " + p)
    print("conformance: %s (%d problems)" % ("FAILED" if problems else "ok", len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
