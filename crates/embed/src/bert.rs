//! The encoder: BERT's embeddings and transformer layers, run on one sentence at a time, and
//! the last layer's states pooled (their mean, or the first's) as the sentence's unit vector.
//! Weights are `f32`, but for the linear layers' and the words' embeddings (16-bit floats);
//! the linear layers are `linear`'s, the attention's products (a few tokens by a few)
//! `matrixmultiply`'s, everything else is plain loops over rows.

use half::f16;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::{linear::Linear, sentence::Pooling};

/// The model's shape, from its `config.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f32,
    #[serde(default = "default_activation")]
    pub hidden_act: String,
}

fn default_eps() -> f32 {
    1e-12
}

fn default_activation() -> String {
    "gelu".into()
}

pub struct Bert {
    config: Config,
    /// The vocabulary's embeddings, as 16-bit floats (half the memory: 23 MB for a vocabulary
    /// of 30,522 words of 384 numbers; a sentence's vector moves by about 1e-4).
    words: Vec<f16>,
    positions: Vec<f32>,
    /// The first token type's embedding (a single sentence has no second).
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl Bert {
    pub fn load(config: Config, file: &[u8]) -> Result<Self, String> {
        if config.hidden_act != "gelu" {
            return Err(format!(
                "its activation is `{}`; only `gelu` is supported",
                config.hidden_act
            ));
        }
        if config.hidden_size == 0 || config.intermediate_size == 0 {
            return Err(format!(
                "its layers are {} wide, {} inside: neither may be 0",
                config.hidden_size, config.intermediate_size
            ));
        }
        let heads = config.num_attention_heads;
        if heads == 0 || !config.hidden_size.is_multiple_of(heads) {
            return Err(format!(
                "{} heads do not divide {} dimensions",
                heads, config.hidden_size
            ));
        }
        let tensors = SafeTensors::deserialize(file).map_err(|error| error.to_string())?;
        let weights = Weights { tensors: &tensors };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm {
                gamma: weights.get(&format!("{name}.weight"), &[h])?,
                beta: weights.get(&format!("{name}.bias"), &[h])?,
                eps: config.layer_norm_eps,
            })
        };
        let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, String> {
            Ok(Linear::new(
                &weights.get(&format!("{name}.weight"), &[outputs, inputs])?,
                weights.get(&format!("{name}.bias"), &[outputs])?,
                inputs,
                outputs,
            ))
        };
        let layers = (0..config.num_hidden_layers)
            .map(|n| {
                let at = |part: &str| format!("encoder.layer.{n}.{part}");
                Ok(Layer {
                    query: linear(&at("attention.self.query"), h, h)?,
                    key: linear(&at("attention.self.key"), h, h)?,
                    value: linear(&at("attention.self.value"), h, h)?,
                    attention_out: linear(&at("attention.output.dense"), h, h)?,
                    attention_norm: norm(&at("attention.output.LayerNorm"))?,
                    intermediate: linear(&at("intermediate.dense"), h, i)?,
                    output: linear(&at("output.dense"), i, h)?,
                    output_norm: norm(&at("output.LayerNorm"))?,
                })
            })
            .collect::<Result<_, String>>()?;
        let types = weights.get_any("embeddings.token_type_embeddings.weight", h)?;
        Ok(Self {
            words: weights
                .get_half("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            positions: weights.get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: types[..h].to_vec(),
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            config,
        })
    }

    pub fn hidden(&self) -> usize {
        self.config.hidden_size
    }

    pub fn vocabulary(&self) -> usize {
        self.config.vocab_size
    }

    pub fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// The unit vector of the sentence `ids` (token ids, `[CLS]` and `[SEP]` included).
    pub fn sentence(&self, ids: &[u32], pooling: Pooling) -> Vec<f32> {
        let (n, h) = (ids.len().min(self.max_positions()), self.hidden());
        let mut x = vec![0f32; n * h];
        for (t, &id) in ids.iter().take(n).enumerate() {
            let id = (id as usize).min(self.config.vocab_size - 1);
            let row = &mut x[t * h..(t + 1) * h];
            let word = &self.words[id * h..(id + 1) * h];
            let position = &self.positions[t * h..(t + 1) * h];
            for (j, value) in row.iter_mut().enumerate() {
                *value = word[j].to_f32() + position[j] + self.token_type[j];
            }
        }
        self.embedding_norm.apply(&mut x, h);
        let mut scratch = Scratch::new(n, h, self.config.intermediate_size);
        for layer in &self.layers {
            self.layer(layer, &mut x, n, &mut scratch);
        }
        let mut pooled = vec![0f32; h];
        // The mean's sum is as good as the mean: the vector is scaled to length 1.
        let rows = match pooling {
            Pooling::Mean => n,
            Pooling::Cls => n.min(1),
        };
        for row in x.chunks_exact(h).take(rows) {
            for (sum, value) in pooled.iter_mut().zip(row) {
                *sum += value;
            }
        }
        let length = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
        if length > 0.0 {
            pooled.iter_mut().for_each(|v| *v /= length);
        }
        pooled
    }

    fn layer(&self, layer: &Layer, x: &mut [f32], n: usize, s: &mut Scratch) {
        let h = self.hidden();
        let heads = self.config.num_attention_heads;
        let d = h / heads;
        layer.query.apply(x, n, &mut s.q);
        layer.key.apply(x, n, &mut s.k);
        layer.value.apply(x, n, &mut s.v);
        let scale = 1.0 / (d as f32).sqrt();
        for head in 0..heads {
            let offset = head * d;
            // scores (n × n) = Q_head · K_headᵀ × scale
            gemm(
                (n, d, n),
                scale,
                (&s.q[offset..], h, 1),
                (&s.k[offset..], 1, h),
                0.0,
                (&mut s.scores, n, 1),
            );
            for row in s.scores.chunks_exact_mut(n) {
                softmax(row);
            }
            // context_head (n × d) = scores · V_head
            gemm(
                (n, n, d),
                1.0,
                (&s.scores, n, 1),
                (&s.v[offset..], h, 1),
                0.0,
                (&mut s.context[offset..], h, 1),
            );
        }
        layer.attention_out.apply(&s.context, n, &mut s.out);
        add_into(&mut s.out, x);
        layer.attention_norm.apply(&mut s.out, h);
        x.copy_from_slice(&s.out);
        layer.intermediate.apply(x, n, &mut s.inner);
        s.inner.iter_mut().for_each(|v| *v = gelu(*v));
        layer.output.apply(&s.inner, n, &mut s.out);
        add_into(&mut s.out, x);
        layer.output_norm.apply(&mut s.out, h);
        x.copy_from_slice(&s.out);
    }
}

/// The buffers of one sentence's pass, reused from layer to layer.
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    scores: Vec<f32>,
    context: Vec<f32>,
    out: Vec<f32>,
    inner: Vec<f32>,
}

impl Scratch {
    fn new(n: usize, h: usize, intermediate: usize) -> Self {
        Self {
            q: vec![0.0; n * h],
            k: vec![0.0; n * h],
            v: vec![0.0; n * h],
            scores: vec![0.0; n * n],
            context: vec![0.0; n * h],
            out: vec![0.0; n * h],
            inner: vec![0.0; n * intermediate],
        }
    }
}

impl Norm {
    /// Normalizes each row of `x` (rows of `width`) in place.
    fn apply(&self, x: &mut [f32], width: usize) {
        for row in x.chunks_exact_mut(width) {
            let mean = row.iter().sum::<f32>() / width as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
            let inverse = 1.0 / (variance + self.eps).sqrt();
            for ((value, gamma), beta) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *value = (*value - mean) * inverse * gamma + beta;
            }
        }
    }
}

/// `C = alpha·A·B + beta·C`, each matrix given as its data with its row and column strides;
/// `dims` is (rows of A, columns of A, columns of B).
fn gemm(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, rsa, csa): (&[f32], usize, usize),
    (b, rsb, csb): (&[f32], usize, usize),
    beta: f32,
    (c, rsc, csc): (&mut [f32], usize, usize),
) {
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * rs + (cols - 1) * cs + 1
        }
    };
    // The products read and write only within the slices (checked here, once per product).
    assert!(a.len() >= last(m, k, rsa, csa));
    assert!(b.len() >= last(k, n, rsb, csb));
    assert!(c.len() >= last(m, n, rsc, csc));
    // SAFETY: the bounds above hold every element the strides reach, and `c` does not overlap
    // `a` or `b` (it is borrowed mutably).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            csc as isize,
        );
    }
}

fn add_into(out: &mut [f32], x: &[f32]) {
    out.iter_mut().zip(x).for_each(|(o, v)| *o += v);
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for value in row.iter_mut() {
        *value = (*value - max).exp();
        sum += *value;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// GELU with the error function, as BERT's `gelu`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26: within 1.5e-7).
fn erf(x: f32) -> f32 {
    let sign = x.signum();
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    sign * (1.0 - poly * (-x * x).exp())
}

/// The tensors of a safetensors file, read as `f32`; a name is looked up as given or under
/// `bert.` (as models exported from a task head name them).
struct Weights<'a> {
    tensors: &'a SafeTensors<'a>,
}

impl Weights<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        self.get_as(name, shape, |value| value)
    }

    /// As `get`, each number made a 16-bit float as it is read (no `f32` copy of the whole).
    fn get_half(&self, name: &str, shape: &[usize]) -> Result<Vec<f16>, String> {
        self.get_as(name, shape, f16::from_f32)
    }

    fn get_as<T>(
        &self,
        name: &str,
        shape: &[usize],
        convert: impl Fn(f32) -> T,
    ) -> Result<Vec<T>, String> {
        let (values, found) = self.read(name, convert)?;
        if found != shape {
            return Err(format!(
                "tensor `{name}` has shape {found:?}, not {shape:?}"
            ));
        }
        Ok(values)
    }

    /// A tensor whose rows are `width` long, however many there are (at least one).
    fn get_any(&self, name: &str, width: usize) -> Result<Vec<f32>, String> {
        let (values, found) = self.read(name, |value| value)?;
        if found.len() != 2 || found[1] != width || found[0] == 0 {
            return Err(format!(
                "tensor `{name}` has shape {found:?}, not [_, {width}]"
            ));
        }
        Ok(values)
    }

    fn read<T>(
        &self,
        name: &str,
        convert: impl Fn(f32) -> T,
    ) -> Result<(Vec<T>, Vec<usize>), String> {
        let tensor = self
            .tensors
            .tensor(name)
            .or_else(|_| self.tensors.tensor(&format!("bert.{name}")))
            .map_err(|_| format!("it has no tensor `{name}`"))?;
        if tensor.dtype() != Dtype::F32 {
            return Err(format!(
                "tensor `{name}` is {:?}; only F32 is supported",
                tensor.dtype()
            ));
        }
        let values = tensor
            .data()
            .chunks_exact(4)
            .map(|bytes| convert(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])))
            .collect();
        Ok((values, tensor.shape().to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_softmax_are_close_to_exact() {
        for (x, expected) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - expected).abs() < 1e-6, "erf({x})");
        }
        let mut row = [1.0, 2.0, 3.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((row[2] - 0.665_240_9).abs() < 1e-6);
    }

    /// A model of no layers whose two words' states, after the embeddings' norm, are `[1, 1]`
    /// and `[-1, 3]`.
    fn two_words() -> Bert {
        let config = Config {
            hidden_size: 2,
            num_attention_heads: 1,
            num_hidden_layers: 0,
            intermediate_size: 1,
            max_position_embeddings: 4,
            vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
        };
        let tensors: [(&str, &[usize], &[f32]); 5] = [
            (
                "embeddings.word_embeddings.weight",
                &[2, 2],
                &[1.0, 0.0, 0.0, 1.0],
            ),
            ("embeddings.position_embeddings.weight", &[4, 2], &[0.0; 8]),
            (
                "embeddings.token_type_embeddings.weight",
                &[1, 2],
                &[0.0; 2],
            ),
            ("embeddings.LayerNorm.weight", &[2], &[1.0, 1.0]),
            ("embeddings.LayerNorm.bias", &[2], &[0.0, 2.0]),
        ];
        let bytes: Vec<Vec<u8>> = (tensors.iter())
            .map(|(_, _, values)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views = tensors.iter().zip(&bytes).map(|((name, shape, _), data)| {
            let view = safetensors::tensor::TensorView::new(Dtype::F32, shape.to_vec(), data);
            (*name, view.unwrap())
        });
        Bert::load(config, &safetensors::serialize(views, None).unwrap()).unwrap()
    }

    #[test]
    fn pooling_takes_the_mean_or_the_first_state() {
        let model = two_words();
        let close = |found: Vec<f32>, expected: [f32; 2]| {
            let length = expected.iter().map(|v| v * v).sum::<f32>().sqrt();
            (found.iter().zip(expected)).all(|(f, e)| (f - e / length).abs() < 1e-5)
        };
        let ids = [0, 0, 1];
        assert!(close(model.sentence(&ids, Pooling::Cls), [1.0, 1.0]));
        assert!(close(model.sentence(&ids, Pooling::Mean), [1.0, 5.0]));
    }

    #[test]
    fn layers_of_no_width_are_refused() {
        let config = |hidden_size, intermediate_size| Config {
            hidden_size,
            num_attention_heads: 1,
            num_hidden_layers: 1,
            intermediate_size,
            max_position_embeddings: 4,
            vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
        };
        for (hidden, intermediate) in [(0, 4), (4, 0)] {
            let error = Bert::load(config(hidden, intermediate), b"").err().unwrap();
            assert!(error.contains("neither may be 0"), "{error}");
        }
    }

    #[test]
    fn products_follow_the_strides() {
        // A (2×3) · Bᵀ where B is stored 2×3: C = [[1·1+2·0+3·1, 1·2+2·1+3·0], …]
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 1.0, 2.0, 1.0, 0.0];
        let mut c = [0.0; 4];
        gemm((2, 3, 2), 1.0, (&a, 3, 1), (&b, 1, 3), 0.0, (&mut c, 2, 1));
        assert_eq!(c, [4.0, 4.0, 10.0, 13.0]);
    }
}
