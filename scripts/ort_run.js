#!/usr/bin/env node
// Runs an ONNX model on the CPU with onnxruntime-node, reading inputs from and writing outputs to
// NumPy .npy files; prints one JSON line describing the outputs (and latency with --repeat).
// Usage: node scripts/ort_run.js MODEL.onnx --input NAME=FILE.npy [...] --output-dir DIR
//          [--threads N] [--repeat R --warmup W]
// onnxruntime-node is taken from .cache/onnxruntime (scripts/install_onnxruntime.sh), or from the
// folder named by IGB_ORT_DIR. Any error prints one line on stderr and exits with status 2.
'use strict';

const fs = require('fs');
const path = require('path');

class UsageError extends Error {}

function fail(message) {
  process.stderr.write(`ort_run: ${String(message).split('\n').join(' | ')}\n`);
  process.exit(2);
}

// NumPy descr (without byte-order mark) <-> onnxruntime tensor type, typed array, item size.
const DTYPES = {
  f4: { ort: 'float32', array: Float32Array, size: 4 },
  f2: { ort: 'float16', array: Uint16Array, size: 2 },
  f8: { ort: 'float64', array: Float64Array, size: 8 },
  i8: { ort: 'int64', array: BigInt64Array, size: 8 },
  i4: { ort: 'int32', array: Int32Array, size: 4 },
  i1: { ort: 'int8', array: Int8Array, size: 1 },
  u1: { ort: 'uint8', array: Uint8Array, size: 1 },
  b1: { ort: 'bool', array: Uint8Array, size: 1 },
};
const READABLE = new Set(['f4', 'f2', 'i8', 'i1', 'u1']);

function parseArgs(argv) {
  const opts = { model: null, inputs: [], outputDir: null, threads: 1, repeat: 0, warmup: 0 };
  const intArg = (name, value, min) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < min) {
      throw new UsageError(`${name} needs an integer >= ${min}`);
    }
    return Number(value);
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--input') {
      const v = argv[++i];
      const eq = v === undefined ? -1 : v.indexOf('=');
      if (eq <= 0 || eq === v.length - 1) throw new UsageError('--input needs NAME=FILE.npy');
      opts.inputs.push({ name: v.slice(0, eq), file: v.slice(eq + 1) });
    } else if (a === '--output-dir') {
      opts.outputDir = argv[++i];
      if (!opts.outputDir) throw new UsageError('--output-dir needs a folder');
    } else if (a === '--threads') {
      opts.threads = intArg('--threads', argv[++i], 1);
    } else if (a === '--repeat') {
      opts.repeat = intArg('--repeat', argv[++i], 1);
    } else if (a === '--warmup') {
      opts.warmup = intArg('--warmup', argv[++i], 0);
    } else if (a.startsWith('--')) {
      throw new UsageError(`unknown option ${a}`);
    } else if (opts.model === null) {
      opts.model = a;
    } else {
      throw new UsageError(`unexpected argument ${a}`);
    }
  }
  if (opts.model === null) throw new UsageError('missing MODEL.onnx');
  if (opts.outputDir === null) throw new UsageError('missing --output-dir DIR');
  return opts;
}

function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    throw new Error(`cannot read ${file}: ${e.code || e.message}`);
  }
  const bad = (why) => new Error(`${file}: not a supported .npy file (${why})`);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw bad('no NUMPY magic');
  const major = buf[6];
  let headerLen;
  let offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw bad('truncated header');
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw bad(`format version ${major}`);
  }
  if (offset + headerLen > buf.length) throw bad('truncated header');
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', offset, offset + headerLen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeM) throw bad('header lacks descr, fortran_order or shape');
  if (fortran[1] === 'True') throw bad('Fortran order; only C order is read');
  const m = /^([<>|=])([a-z]\d+)$/.exec(descr[1]);
  if (!m || !READABLE.has(m[2])) {
    throw bad(`dtype ${descr[1]}; supported: float32, float16, int64, int8, uint8`);
  }
  const dt = DTYPES[m[2]];
  if (m[1] === '>' && dt.size > 1) throw bad(`big-endian dtype ${descr[1]}`);
  const shape = shapeM[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      if (!/^\d+L?$/.test(s)) throw bad(`shape entry '${s}'`);
      return parseInt(s, 10);
    });
  const count = shape.reduce((a, b) => a * b, 1);
  const dataStart = offset + headerLen;
  if (buf.length - dataStart !== count * dt.size) {
    throw bad(`expected ${count * dt.size} data bytes for shape (${shape}), found ${buf.length - dataStart}`);
  }
  // Copy into a fresh, aligned buffer: the data offset need not suit the typed array.
  const data = new dt.array(count);
  Buffer.from(data.buffer).set(buf.subarray(dataStart));
  return { type: dt.ort, data, shape };
}

function writeNpy(file, tensor) {
  const entry = Object.entries(DTYPES).find(([, d]) => d.ort === tensor.type);
  if (!entry) throw new Error(`output type ${tensor.type} cannot be written as .npy`);
  const [code, dt] = entry;
  const order = dt.size === 1 ? '|' : '<';
  const dims = tensor.dims.map(String);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${order}${code}', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = (64 - ((10 + header.length + 1) % 64)) % 64;
  header += ' '.repeat(pad) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function loadOrt() {
  const base = process.env.IGB_ORT_DIR || path.join(__dirname, '..', '.cache', 'onnxruntime');
  const where = path.join(base, 'node_modules', 'onnxruntime-node');
  try {
    return require(where);
  } catch (e) {
    throw new Error(
      `cannot load onnxruntime-node from ${where} (run scripts/install_onnxruntime.sh): ` +
        e.message.split('\n')[0],
    );
  }
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof UsageError) {
      fail(`${e.message}; usage: ort_run.js MODEL.onnx --input NAME=FILE.npy [...] ` +
        '--output-dir DIR [--threads N] [--repeat R --warmup W]');
    }
    throw e;
  }
  const ort = loadOrt();
  const feeds = {};
  for (const { name, file } of opts.inputs) {
    if (name in feeds) throw new Error(`input ${name} given twice`);
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.type, t.data, t.shape);
  }

  let session;
  try {
    session = await ort.InferenceSession.create(opts.model, {
      executionProviders: ['cpu'],
      intraOpNumThreads: opts.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 3,
    });
  } catch (e) {
    throw new Error(`cannot load model ${opts.model}: ${e.message}`);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) {
    throw new Error(`missing input(s) ${missing.join(', ')}; the model takes ${session.inputNames.join(', ')}`);
  }
  const extra = Object.keys(feeds).filter((n) => !session.inputNames.includes(n));
  if (extra.length) {
    throw new Error(`unknown input(s) ${extra.join(', ')}; the model takes ${session.inputNames.join(', ')}`);
  }

  const run = async () => {
    try {
      return await session.run(feeds);
    } catch (e) {
      throw new Error(`inference failed: ${e.message}`);
    }
  };
  const results = await run();
  fs.mkdirSync(opts.outputDir, { recursive: true });
  const outputs = [];
  const taken = new Set();
  for (const name of session.outputNames) {
    const t = results[name];
    // Names differing only in characters a file name cannot hold get distinct files.
    let stem = name.replace(/[^A-Za-z0-9._-]/g, '_');
    while (taken.has(stem)) stem += '_';
    taken.add(stem);
    const file = path.join(opts.outputDir, `${stem}.npy`);
    writeNpy(file, t);
    outputs.push({ name, shape: t.dims.map(Number), dtype: t.type, file });
  }
  const report = { model: opts.model, threads: opts.threads, outputs };
  if (opts.repeat > 0) {
    for (let i = 0; i < opts.warmup; ++i) await run();
    const times = [];
    for (let i = 0; i < opts.repeat; ++i) {
      const t0 = process.hrtime.bigint();
      await run();
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    report.latency_ms = { median: median(times), min: times[0], repeat: opts.repeat, warmup: opts.warmup };
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
  await session.release();
}

main().catch((e) => fail(e.message));
