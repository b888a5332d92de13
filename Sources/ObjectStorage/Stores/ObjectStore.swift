import Foundation
import ImageLoader
import ImageLoaderSupport
import Logging

/// One kind of store: how a read or a write of an object becomes a signed HTTP request.
protocol ObjectStore: Sendable {
    /// The request that reads `object` with `headers` (validators, User-Agent), signed.
    func read(_ object: ObjectLocation, headers: [HeaderField]) async throws -> DataRequest
    /// The request that writes `body` to `object`, signed.
    func write(_ object: ObjectLocation, body: [UInt8], contentType: String, metadata: [String: String]) async throws
        -> DataRequest
    /// The answer to a read as the cache should see it (a store's own fields named as HTTP's).
    func normalized(_ response: DataResponse) -> DataResponse
    /// A 304 made here when the store cannot answer one itself but can say cheaply
    /// whether the object changed; `nil` to send the read.
    func notModified(_ object: ObjectLocation, headers: [HeaderField], http: any DataLoading) async throws
        -> DataResponse?
    /// A stored object's metadata entry, as the write sent it and the read returns it.
    func metadataName(_ name: String) -> String
}

extension ObjectStore {
    func normalized(_ response: DataResponse) -> DataResponse { response }
    func notModified(_ object: ObjectLocation, headers: [HeaderField], http: any DataLoading) async throws
        -> DataResponse?
    { nil }
}
