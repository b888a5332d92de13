import Foundation

enum FileManagerHelper {
    static func temporaryFile(named name: String, contents: [UInt8]) -> String {
        let directory = NSTemporaryDirectory() + "rasterimage-tests-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + name
        FileManager.default.createFile(atPath: path, contents: Data(contents))
        return path
    }

    static func temporaryDirectory() -> String {
        let directory = NSTemporaryDirectory() + "rasterimage-tests-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }
}
