import CDeflate
import CISAL
import ImageLoaderSupport

/// Inflates a zlib stream, given in pieces (a PNG's IDAT chunks, in order), into a
/// buffer of exactly the size it must fill, with whichever of two libraries is faster
/// for it.
///
/// Where both take a stream they give the same bytes, and both check its Adler-32 and
/// size. ISA-L is the more lenient: it takes a stream with an incomplete Huffman table
/// for distances (codes that do not fill the code space) that the data never uses,
/// where zlib, libpng's inflater, and libdeflate refuse it (found by differential
/// fuzzing: 1 of 18,000 mutated streams).
///
/// They differ in speed with what the stream holds. ISA-L's decoder is faster on
/// streams made mostly of literals, which is what photos saved as PNG compress to;
/// libdeflate is faster on streams made mostly of long matches (flat graphics,
/// gradients, screenshots) and on streams that barely compress.
/// How much the stream shrank tells the two apart before a byte is inflated. Measured
/// here on 2000x1500 images, inflating whole streams:
///
/// | inflated / compressed | images | ISA-L against libdeflate |
/// |---|---|---|
/// | 1.17 | gradient under heavy noise | 0.88x |
/// | 1.38 - 1.95 | photos (plasma, noise, blur; a JPEG photo) | 1.07x - 1.44x |
/// | 2.37 - 2.47 | a photo with alpha, a 64-colour photo | 1.09x - 1.19x |
/// | 4.2 - 8.1 | posterised and blurred photos, an enlarged picture | 0.77x - 1.02x |
/// | 100 and more | checkerboard, gradient, shapes on white | 0.15x - 0.45x |
///
/// so ISA-L takes the streams that shrank by 1.3 to 3 times, libdeflate the rest.
enum ZlibInflate {
    /// Which library inflates a stream.
    enum Engine: CaseIterable, Sendable {
        case libdeflate
        case isal

        /// The faster engine for a stream of `compressed` bytes that inflates to
        /// `inflated`: ISA-L when the stream shrank by 1.3 to 3 times.
        static func preferred(inflated: Int, compressed: Int) -> Engine {
            guard compressed > 0, let low = Checked.multiply(compressed, 13),
                let high = Checked.multiply(compressed, 3),
                let scaled = Checked.multiply(inflated, 10)
            else { return .libdeflate }
            return scaled >= low && inflated <= high ? .isal : .libdeflate
        }
    }

    /// Inflates the zlib stream made of `parts`, in order, into exactly `count` bytes at
    /// `output`; false unless the zlib header is well formed (deflate, a window of at
    /// most 32 KiB, no preset dictionary), the engine finds the stream valid (its
    /// Adler-32 included), it ends with the last part's last byte and fills exactly
    /// `count` bytes. When it returns false, `output` may have been written.
    static func inflate(
        _ parts: [UnsafeRawBufferPointer], into output: UnsafeMutablePointer<UInt8>, count: Int,
        engine: Engine? = nil
    ) -> Bool {
        var compressed = 0
        for part in parts {
            guard let total = Checked.add(compressed, part.count) else { return false }
            compressed = total
        }
        guard compressed >= 2, count >= 0, count <= Int(UInt32.max) else { return false }
        switch engine ?? Engine.preferred(inflated: count, compressed: compressed) {
        case .libdeflate: return inflateWithLibdeflate(parts, compressed: compressed, into: output, count: count)
        case .isal: return inflateWithISAL(parts, into: output, count: count)
        }
    }

    /// libdeflate inflates whole buffers only: pieces are joined into one first.
    private static func inflateWithLibdeflate(
        _ parts: [UnsafeRawBufferPointer], compressed: Int, into output: UnsafeMutablePointer<UInt8>, count: Int
    ) -> Bool {
        let pieces = parts.filter { $0.count > 0 }
        if pieces.count == 1 { return inflateWithLibdeflate(pieces[0], into: output, count: count) }
        let joined = UnsafeMutableRawBufferPointer.allocate(byteCount: compressed, alignment: 16)
        defer { joined.deallocate() }
        var filled = 0
        for piece in pieces {
            (joined.baseAddress! + filled).copyMemory(from: piece.baseAddress!, byteCount: piece.count)
            filled += piece.count
        }
        return inflateWithLibdeflate(UnsafeRawBufferPointer(joined), into: output, count: count)
    }

    private static func inflateWithLibdeflate(
        _ stream: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<UInt8>, count: Int
    ) -> Bool {
        guard let decompressor = libdeflate_alloc_decompressor() else { return false }
        defer { libdeflate_free_decompressor(decompressor) }
        var consumed = 0
        var produced = 0
        let result = libdeflate_zlib_decompress_ex(
            decompressor, stream.baseAddress, stream.count, output, count, &consumed, &produced)
        return result == LIBDEFLATE_SUCCESS && consumed == stream.count && produced == count
    }

    /// ISA-L inflates a piece at a time, so the pieces are never joined. Its state
    /// (about 85 KiB, most of it a window for output that did not fit) is allocated
    /// per stream.
    private static func inflateWithISAL(
        _ parts: [UnsafeRawBufferPointer], into output: UnsafeMutablePointer<UInt8>, count: Int
    ) -> Bool {
        // ISA-L parses the header too, but says less about what it accepts: it is checked
        // here as libdeflate and zlib check it, so both engines judge headers alike.
        guard let header = firstTwoBytes(parts), header.0 & 0x0F == 8, header.0 >> 4 <= 7,
            header.1 & 0x20 == 0, (UInt16(header.0) << 8 | UInt16(header.1)) % 31 == 0
        else { return false }
        let state = UnsafeMutablePointer<inflate_state>.allocate(capacity: 1)
        defer { state.deallocate() }
        isal_inflate_init(state)
        state.pointee.crc_flag = UInt32(ISAL_ZLIB)
        state.pointee.next_out = output
        state.pointee.avail_out = UInt32(count)
        for part in parts where part.count > 0 {
            // Data after the end of the stream, or a piece larger than ISA-L counts (a
            // PNG chunk is at most 2^31 - 1 bytes, but this takes any pieces).
            guard state.pointee.block_state != ISAL_BLOCK_FINISH, let length = UInt32(exactly: part.count) else {
                return false
            }
            // ISA-L reads its input only; its field is not const.
            state.pointee.next_in = UnsafeMutablePointer(
                mutating: part.baseAddress!.assumingMemoryBound(to: UInt8.self))
            state.pointee.avail_in = length
            guard cisal_inflate(state) == ISAL_DECOMP_OK, state.pointee.avail_in == 0 else { return false }
        }
        // Finished (the checksum matched); no byte after the stream (ISA-L reads ahead
        // into a bit buffer, which holds whole bytes past the end, or at most 7 bits of
        // the stream's own); nothing held back for want of room; every byte written.
        return state.pointee.block_state == ISAL_BLOCK_FINISH && state.pointee.read_in_length < 8
            && state.pointee.avail_out == 0
            && state.pointee.tmp_out_valid == state.pointee.tmp_out_processed
            && Int(state.pointee.total_out) == count
    }

    private static func firstTwoBytes(_ parts: [UnsafeRawBufferPointer]) -> (UInt8, UInt8)? {
        var bytes: [UInt8] = []
        for part in parts {
            for byte in part {
                bytes.append(byte)
                if bytes.count == 2 { return (bytes[0], bytes[1]) }
            }
        }
        return nil
    }
}
