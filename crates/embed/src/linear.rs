//! The encoder's linear layers, `y = x·Wᵀ + b`, for the few rows (tokens) of one sentence.
//!
//! A query has about ten tokens, so a product reads each weight once or a few times: its cost
//! is reading the weights, not multiplying. They are kept as 16-bit floats (half the bytes to
//! read; a sentence's vector moves by about 1e-4), laid out once, when the model is loaded, in
//! panels of `PANEL` output columns (a panel holds, input by input, the weights of its
//! columns), so that a product reads them in order, one panel at a time. On x86-64 with AVX2,
//! FMA and F16C, the sums of six rows of a panel are kept in registers while its weights
//! stream by; elsewhere the same order runs as plain loops.

use half::f16;

/// The output columns of a panel: two AVX registers of `f32`.
const PANEL: usize = 16;

/// The rows whose sums the AVX2 product keeps in registers at once (two registers each: 12 of
/// the 16, beside the two of the weights and one of the broadcast input).
#[cfg(target_arch = "x86_64")]
const ROWS_AT_ONCE: usize = 6;

pub struct Linear {
    /// `W` in panels: panel `p` holds, for each input `i`, `W[p·PANEL + c][i]` for `c` in
    /// `0..PANEL` (zeros beyond the last output).
    panels: Vec<f16>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    /// The layer of `weight` (`outputs × inputs`, as checkpoints store it) and `bias`; neither
    /// dimension may be 0.
    pub fn new(weight: &[f32], bias: Vec<f32>, inputs: usize, outputs: usize) -> Self {
        assert!(inputs > 0 && outputs > 0);
        assert_eq!(weight.len(), inputs * outputs);
        assert_eq!(bias.len(), outputs);
        let mut panels = vec![f16::ZERO; outputs.div_ceil(PANEL) * inputs * PANEL];
        for (output, row) in weight.chunks_exact(inputs).enumerate() {
            let panel = &mut panels[output / PANEL * inputs * PANEL..];
            for (input, value) in row.iter().enumerate() {
                panel[input * PANEL + output % PANEL] = f16::from_f32(*value);
            }
        }
        Self {
            panels,
            bias,
            inputs,
            outputs,
        }
    }

    /// `out = x·Wᵀ + b` for the first `rows` rows of `x`.
    pub fn apply(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.inputs && out.len() >= rows * self.outputs);
        for row in out.chunks_exact_mut(self.outputs).take(rows) {
            row.copy_from_slice(&self.bias);
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the processor has the features the function is compiled for, and the
            // lengths of `x` and `out` are checked above.
            unsafe { self.add_product_avx2(x, rows, out) };
            return;
        }
        self.add_product(x, rows, out);
    }

    /// The panels, each with the first column of `out` it adds to and how many it fills.
    fn panels(&self) -> impl Iterator<Item = (&[f16], usize, usize)> {
        (self.panels.chunks_exact(self.inputs * PANEL).enumerate()).map(|(p, panel)| {
            let column = p * PANEL;
            (panel, column, PANEL.min(self.outputs - column))
        })
    }

    /// `out += x·Wᵀ`, in plain loops (each panel's sums for one row, then the next row's).
    fn add_product(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        for (panel, column, width) in self.panels() {
            for row in 0..rows {
                let mut sums = [0f32; PANEL];
                let inputs = &x[row * self.inputs..(row + 1) * self.inputs];
                for (value, weights) in inputs.iter().zip(panel.chunks_exact(PANEL)) {
                    for (sum, weight) in sums.iter_mut().zip(weights) {
                        *sum += value * weight.to_f32();
                    }
                }
                let start = row * self.outputs + column;
                add_into(&mut out[start..start + width], &sums);
            }
        }
    }

    /// `out += x·Wᵀ` with AVX2, FMA and F16C: for each panel, up to `ROWS_AT_ONCE` rows at a time.
    ///
    /// # Safety
    /// The processor has AVX2, FMA and F16C; `x` holds `rows` rows of `inputs`, `out` of `outputs`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn add_product_avx2(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        for (panel, column, width) in self.panels() {
            let mut row = 0;
            while row < rows {
                let block = (rows - row).min(ROWS_AT_ONCE);
                let x = &x[row * self.inputs..(row + block) * self.inputs];
                let out = &mut out[row * self.outputs..(row + block) * self.outputs];
                let at = (column, width, self.outputs);
                // SAFETY: as this function's; `x` and `out` hold `block` rows.
                unsafe {
                    match block {
                        6 => add_panel::<6>(x, self.inputs, panel, out, at),
                        5 => add_panel::<5>(x, self.inputs, panel, out, at),
                        4 => add_panel::<4>(x, self.inputs, panel, out, at),
                        3 => add_panel::<3>(x, self.inputs, panel, out, at),
                        2 => add_panel::<2>(x, self.inputs, panel, out, at),
                        _ => add_panel::<1>(x, self.inputs, panel, out, at),
                    }
                }
                row += block;
            }
        }
    }
}

/// Adds to `R` rows of `out` (each `outputs` long, from `column`, `width` of them) those of `x`
/// (each `inputs` long) times one panel's weights.
///
/// # Safety
/// The processor has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn add_panel<const R: usize>(
    x: &[f32],
    inputs: usize,
    panel: &[f16],
    out: &mut [f32],
    (column, width, outputs): (usize, usize, usize),
) {
    use std::arch::x86_64::{
        __m128i, __m256, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_fmadd_ps, _mm256_set1_ps,
        _mm256_setzero_ps, _mm256_storeu_ps,
    };
    assert!(x.len() >= R * inputs && panel.len() >= inputs * PANEL);
    let mut sums: [[__m256; 2]; R] = [[_mm256_setzero_ps(); 2]; R];
    for (input, weights) in panel.chunks_exact(PANEL).take(inputs).enumerate() {
        // SAFETY: `weights` holds PANEL (16) halves: two loads of eight (16 bytes each).
        let (low, high) = unsafe {
            let at = weights.as_ptr().cast::<__m128i>();
            (
                _mm256_cvtph_ps(_mm_loadu_si128(at)),
                _mm256_cvtph_ps(_mm_loadu_si128(at.add(1))),
            )
        };
        for (r, sums) in sums.iter_mut().enumerate() {
            // SAFETY: `r < R` and `input < inputs`, within `x` (asserted above).
            let value = _mm256_set1_ps(unsafe { *x.get_unchecked(r * inputs + input) });
            sums[0] = _mm256_fmadd_ps(value, low, sums[0]);
            sums[1] = _mm256_fmadd_ps(value, high, sums[1]);
        }
    }
    for (r, sums) in sums.iter().enumerate() {
        let mut row = [0f32; PANEL];
        // SAFETY: `row` holds PANEL (16) values: two stores of eight.
        unsafe {
            _mm256_storeu_ps(row.as_mut_ptr(), sums[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(8), sums[1]);
        }
        let start = r * outputs + column;
        add_into(&mut out[start..start + width], &row);
    }
}

fn add_into(out: &mut [f32], sums: &[f32]) {
    out.iter_mut().zip(sums).for_each(|(o, s)| *o += s);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x·Wᵀ + b` summed in `f64`, one output at a time.
    fn exact(weight: &[f32], bias: &[f32], x: &[f32], rows: usize, inputs: usize) -> Vec<f32> {
        let outputs = bias.len();
        let mut out = Vec::with_capacity(rows * outputs);
        for row in x.chunks_exact(inputs).take(rows) {
            for (w, b) in weight.chunks_exact(inputs).zip(bias) {
                let sum: f64 = row.iter().zip(w).map(|(a, b)| *a as f64 * *b as f64).sum();
                out.push((sum + *b as f64) as f32);
            }
        }
        out
    }

    #[test]
    fn both_products_match_the_exact_one_for_any_rows_and_widths() {
        // Outputs that fill panels and that leave the last one partly empty; rows more and
        // fewer than a block of the AVX2 product.
        for (inputs, outputs) in [(24, 32), (7, 20), (5, 3)] {
            let weight: Vec<f32> = (0..inputs * outputs)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
                .collect();
            let bias: Vec<f32> = (0..outputs).map(|o| o as f32 / 8.0).collect();
            let linear = Linear::new(&weight, bias.clone(), inputs, outputs);
            for rows in [1, 5, 6, 7, 13] {
                let x: Vec<f32> = (0..rows * inputs)
                    .map(|i| ((i * 53 % 89) as f32 - 44.0) / 32.0)
                    .collect();
                let expected = exact(&weight, &bias, &x, rows, inputs);
                let mut fast = vec![f32::NAN; rows * outputs];
                linear.apply(&x, rows, &mut fast);
                let mut plain = vec![0f32; rows * outputs];
                for row in plain.chunks_exact_mut(outputs) {
                    row.copy_from_slice(&bias);
                }
                linear.add_product(&x, rows, &mut plain);
                for ((fast, plain), expected) in fast.iter().zip(&plain).zip(&expected) {
                    assert!(
                        (fast - expected).abs() < 1e-4,
                        "{inputs}×{outputs}, {rows} rows"
                    );
                    assert!(
                        (plain - expected).abs() < 1e-4,
                        "{inputs}×{outputs}, {rows} rows"
                    );
                }
            }
        }
    }
}
