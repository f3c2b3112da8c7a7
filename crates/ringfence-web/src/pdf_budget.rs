//! How much a PDF expands to before it is parsed. The PDF parser inflates every compressed
//! stream whole, so a small file can hold gigabytes (a decompression bomb inside the
//! document, which the download cap does not see). Each stream is measured here first —
//! Flate streams by inflating them into a counter, never into memory, and other coding
//! filters at their worst-case ratio — and a document over the budget is refused.

use std::io::Read;

/// LZW's worst case: a 12-bit code can stand for a string of up to 4,096 bytes.
const LZW_RATIO: usize = 2731;
/// Run-length coding's worst case: two bytes for a run of 128.
const RUN_LENGTH_RATIO: usize = 64;

/// The bytes the streams of `pdf` expand to, or `None` when that is more than `budget`.
pub fn expanded_size(pdf: &[u8], budget: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut from = 0;
    while let Some(at) = find(&pdf[from..], b"stream") {
        let keyword = from + at;
        from = keyword + 6;
        // `endstream` contains `stream`; and a stream keyword is followed by a line break.
        if keyword >= 3 && &pdf[keyword - 3..keyword] == b"end" {
            continue;
        }
        let data_start = match pdf.get(from..from + 2) {
            Some([b'\r', b'\n']) => from + 2,
            Some([b'\n', _]) | Some([b'\r', _]) => from + 1,
            _ => continue,
        };
        let data_end = find(&pdf[data_start..], b"endstream").map_or(pdf.len(), |e| data_start + e);
        let data = pdf[data_start..data_end]
            .strip_suffix(b"\n")
            .unwrap_or(&pdf[data_start..data_end]);
        let data = data.strip_suffix(b"\r").unwrap_or(data);
        // The stream's dictionary: the text since the previous `obj`, at most 4 KiB back.
        let dict_from = keyword.saturating_sub(4096);
        let dict_area = &pdf[dict_from..keyword];
        let dict_start = rfind(dict_area, b"obj").map_or(0, |i| i + 3);
        let dict = &dict_area[dict_start..];
        let flate = find(dict, b"FlateDecode").is_some() || find(dict, b"/Fl ").is_some();
        let wrapped =
            find(dict, b"ASCII85Decode").is_some() || find(dict, b"ASCIIHexDecode").is_some();
        let size = if find(dict, b"LZWDecode").is_some() {
            data.len().saturating_mul(LZW_RATIO)
        } else if find(dict, b"RunLengthDecode").is_some() {
            data.len().saturating_mul(RUN_LENGTH_RATIO)
        } else if flate && wrapped {
            // Text-coded compressed data: judged by what inflating the raw bytes cannot tell,
            // at LZW's bound.
            data.len().saturating_mul(LZW_RATIO)
        } else if flate {
            inflated_size(data, budget.saturating_sub(total).saturating_add(1))
        } else {
            data.len()
        };
        total = total.saturating_add(size);
        if total > budget {
            return None;
        }
        from = data_end;
    }
    Some(total)
}

/// How many bytes `data` inflates to, counting at most `limit` (zlib, else raw deflate).
fn inflated_size(data: &[u8], limit: usize) -> usize {
    let count = |reader: &mut dyn Read| {
        let mut sink = [0u8; 16 << 10];
        let mut n = 0usize;
        while n < limit {
            match reader.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        n
    };
    let zlib = count(&mut flate2::read::ZlibDecoder::new(data).take(limit as u64));
    if zlib > 0 {
        return zlib;
    }
    count(&mut flate2::read::DeflateDecoder::new(data).take(limit as u64)).max(data.len())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pdf_with_stream(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "%PDF-1.4\n1 0 obj\n<< {dict} /Length {} >>\nstream\n",
            data.len()
        )
        .into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        out
    }

    fn deflate(bytes: usize) -> Vec<u8> {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(zeros.len());
            enc.write_all(&zeros[..n]).unwrap();
            left -= n;
        }
        enc.finish().unwrap()
    }

    #[test]
    fn flate_streams_are_measured_by_what_they_inflate_to() {
        let small = pdf_with_stream("/Filter /FlateDecode", &deflate(1_000_000));
        assert_eq!(expanded_size(&small, 10_000_000), Some(1_000_000));
        let bomb = pdf_with_stream("/Filter /FlateDecode", &deflate(200_000_000));
        assert!(bomb.len() < 1_000_000);
        assert_eq!(expanded_size(&bomb, 100_000_000), None);
    }

    #[test]
    fn other_filters_count_at_their_worst_case() {
        let lzw = pdf_with_stream("/Filter /LZWDecode", &[0u8; 100_000]);
        assert_eq!(expanded_size(&lzw, 100_000_000), None);
        let plain = pdf_with_stream("", b"BT (hello) Tj ET");
        assert_eq!(expanded_size(&plain, 1000), Some(16));
    }
}
