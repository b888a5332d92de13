import ImageLoaderSupport

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where encoded image bytes come from: memory, or a file read as the decoder needs it.
///
/// A file source never loads the whole file unless the format demands it (WebP):
/// PNG, JPEG, GIF, TIFF and BMP decoders read it in small pieces, which keeps
/// memory low when making thumbnails of large files.
///
/// ```swift
/// let fromDisk = ImageSource.file(path: "/srv/images/cat.png")
/// let fromNetwork = ImageSource.data(responseBody)
/// ```
public struct ImageSource: Sendable {
    enum Storage: Sendable {
        case bytes([UInt8])
        case data(Data)
        case file(String)
        case collection(any Collection<UInt8> & Sendable)
    }

    let storage: Storage

    /// Bytes in an array.
    public static func bytes(_ bytes: [UInt8]) -> ImageSource { ImageSource(storage: .bytes(bytes)) }
    /// Bytes in a `Data`.
    public static func data(_ data: Data) -> ImageSource { ImageSource(storage: .data(data)) }
    /// Bytes in any collection, read in place when it has contiguous storage (a
    /// `ByteBuffer`'s `readableBytesView`, an `ArraySlice`, a `Data` slice), copied
    /// once otherwise. Nothing is copied when the source is made.
    ///
    /// ```swift
    /// let upload: ByteBuffer = request.body              // in a server handler
    /// let image = try ImageDecoder().decode(.bytes(upload.readableBytesView))
    /// ```
    public static func bytes(_ collection: some Collection<UInt8> & Sendable) -> ImageSource {
        ImageSource(storage: .collection(collection))
    }

    /// A regular file, opened and read when a decode runs.
    public static func file(path: String) -> ImageSource { ImageSource(storage: .file(path)) }

    /// The file's path, for a file source.
    public var path: String? {
        if case .file(let path) = storage { return path }
        return nil
    }

    /// The first `count` bytes (fewer when the input is shorter), for sniffing.
    ///
    /// ```swift
    /// let format = ImageFormat.sniff(try source.leadingBytes())
    /// ```
    public func leadingBytes(_ count: Int = ImageFormat.sniffLength) throws(ImageDecodingError) -> [UInt8] {
        try ImageDecoder.convertingErrors {
            try withReader(limits: DecodingLimits()) { $0.bytes(at: 0, count: count) }
        }
    }

    /// Runs `body` with a reader over the bytes, after checking the input size limit.
    func withReader<R>(
        limits: DecodingLimits, _ body: (ByteReader) throws -> R
    ) throws -> R {
        switch storage {
        case .bytes(let bytes):
            return try bytes.withUnsafeBytes { buffer in
                try ByteReader.withMemory(buffer, limits: limits, body)
            }
        case .data(let data):
            return try data.withUnsafeBytes { buffer in
                try ByteReader.withMemory(buffer, limits: limits, body)
            }
        case .collection(let collection):
            return try ImageSource.read(collection, limits: limits, body)
        case .file(let path):
            let reader = try ByteReader(path: path)
            defer { reader.close() }
            try reader.checkSize(limits: limits)
            return try body(reader)
        }
    }
}

extension ImageSource {
    /// Reads a collection in place when its storage is contiguous, else from one copy.
    fileprivate static func read<C: Collection<UInt8>, R>(
        _ collection: C, limits: DecodingLimits, _ body: (ByteReader) throws -> R
    ) throws -> R {
        if let result = try collection.withContiguousStorageIfAvailable({ buffer in
            try ByteReader.withMemory(UnsafeRawBufferPointer(buffer), limits: limits, body)
        }) {
            return result
        }
        // Check the size before copying: the copy is the working memory here.
        guard collection.count <= limits.maxInputBytes else {
            throw ImageDecodingError(.inputTooLarge(bytes: collection.count, limit: limits.maxInputBytes))
        }
        return try Array(collection).withUnsafeBytes { buffer in
            try ByteReader.withMemory(buffer, limits: limits, body)
        }
    }
}

/// Reads the bytes of one ``ImageSource`` for one decode: sequentially through a
/// buffer (for the C libraries' read callbacks) or at any offset. Not shared
/// between threads; lives only for the decode.
final class ByteReader {
    /// Total size of the input in bytes.
    let size: Int
    /// The whole input, when it is in memory. Valid only during the decode.
    let memory: UnsafeRawBufferPointer?
    /// The sequential read position.
    private(set) var position = 0
    /// Set when a read asked for more bytes than were left.
    private(set) var reachedEnd = false
    /// The errno of a failed read from the file, if any.
    private(set) var readError: Int32 = 0

    private var descriptor: Int32 = -1
    private var buffer: UnsafeMutableRawBufferPointer?
    private var bufferOffset = 0  // file offset of buffer[0]
    private var bufferCount = 0

    private static let bufferCapacity = 64 << 10

    private init(memory: UnsafeRawBufferPointer) {
        self.memory = memory
        self.size = memory.count
    }

    static func withMemory<R>(
        _ memory: UnsafeRawBufferPointer, limits: DecodingLimits,
        _ body: (ByteReader) throws -> R
    ) throws -> R {
        let reader = ByteReader(memory: memory)
        try reader.checkSize(limits: limits)
        return try body(reader)
    }

    init(path: String) throws {
        let (fd, size) = try Platform.openRegularFile(path)
        self.descriptor = fd
        self.size = size
        self.memory = nil
        self.buffer = .allocate(byteCount: ByteReader.bufferCapacity, alignment: 16)
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 {
            Platform.closeDescriptor(descriptor)
            descriptor = -1
        }
        buffer?.deallocate()
        buffer = nil
    }

    func checkSize(limits: DecodingLimits) throws {
        guard size > 0 else { throw ImageDecodingError(.empty) }
        guard size <= limits.maxInputBytes else {
            throw ImageDecodingError(.inputTooLarge(bytes: size, limit: limits.maxInputBytes))
        }
    }

    /// Copies up to `count` bytes from the read position and advances it. Returns
    /// how many were copied; fewer than `count` means the input ended.
    func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        guard count > 0 else { return 0 }
        let copied: Int
        if let memory {
            copied = max(0, min(count, size - position))
            if copied > 0 { destination.copyMemory(from: memory.baseAddress! + position, byteCount: copied) }
        } else {
            copied = readBuffered(into: destination, count: count)
        }
        position += copied
        if copied < count { reachedEnd = true }
        return copied
    }

    private func readBuffered(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        var copied = 0
        while copied < count {
            let inBuffer = bufferOffset + bufferCount - (position + copied)
            if inBuffer > 0 && position + copied >= bufferOffset {
                let take = min(inBuffer, count - copied)
                let start = position + copied - bufferOffset
                (destination + copied).copyMemory(from: buffer!.baseAddress! + start, byteCount: take)
                copied += take
                continue
            }
            let wanted = count - copied
            if wanted >= ByteReader.bufferCapacity {
                // Large reads skip the buffer.
                let got = readFile(at: position + copied, into: destination + copied, count: wanted)
                copied += got
                break
            }
            bufferOffset = position + copied
            bufferCount = readFile(at: bufferOffset, into: buffer!.baseAddress!, count: ByteReader.bufferCapacity)
            if bufferCount == 0 { break }
        }
        return copied
    }

    /// Copies up to `count` bytes at `offset` without moving the read position.
    func read(at offset: Int, into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        guard count > 0, offset >= 0, offset < size else {
            if count > 0 { reachedEnd = true }
            return 0
        }
        let wanted = min(count, size - offset)
        let copied: Int
        if let memory {
            destination.copyMemory(from: memory.baseAddress! + offset, byteCount: wanted)
            copied = wanted
        } else {
            copied = readFile(at: offset, into: destination, count: wanted)
        }
        if copied < count { reachedEnd = true }
        return copied
    }

    /// Up to `count` bytes at `offset`, without moving the read position.
    func bytes(at offset: Int, count: Int) -> [UInt8] {
        let available = max(0, min(count, size - max(0, offset)))
        return [UInt8](unsafeUninitializedCapacity: available) { buffer, initialized in
            initialized = available == 0 ? 0 : read(at: offset, into: buffer.baseAddress!, count: available)
        }
    }

    /// Moves the read position past data sub-blocks as GIF lays them out (a length byte,
    /// that many bytes, again, until a length of 0). Returns `false` when the input ends
    /// first. In memory, a loop over the bytes: a GIF read through giflib goes through
    /// its read callback twice a sub-block, and a file of one-byte sub-blocks cost many
    /// times the decode of a valid file of its size.
    func skipSubBlocks() -> Bool {
        if let memory {
            var at = position
            while at < size {
                let length = Int(memory[at])
                at += 1 + length
                if length == 0 {
                    position = at
                    return true
                }
            }
            position = size
            reachedEnd = true
            return false
        }
        var length: UInt8 = 0
        while read(into: &length, count: 1) == 1 {
            if length == 0 { return true }
            seek(to: position + Int(length))
        }
        return false
    }

    /// Moves the read position.
    func seek(to offset: Int) {
        position = max(0, offset)
    }

    /// Runs `body` over the whole input in one buffer: the memory itself, or the
    /// file read into a temporary allocation (its size was checked against the limits).
    func withContiguousBytes<R>(
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        if let memory { return try body(memory) }
        let whole = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { whole.deallocate() }
        let got = readFile(at: 0, into: whole.baseAddress!, count: size)
        if readError != 0 {
            throw ImageDecodingError(.unreadable, message: System.describe(errno: readError))
        }
        return try body(UnsafeRawBufferPointer(rebasing: whole[0..<got]))
    }

    private func readFile(at offset: Int, into destination: UnsafeMutableRawPointer, count: Int) -> Int {
        let (done, error) = Platform.read(descriptor, into: destination, count: count, at: offset)
        if error != 0 { readError = error }
        return done
    }

    /// An opaque pointer for C callbacks; valid while the reader is alive.
    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ context: UnsafeMutableRawPointer?) -> ByteReader {
        Unmanaged<ByteReader>.fromOpaque(context!).takeUnretainedValue()
    }
}
