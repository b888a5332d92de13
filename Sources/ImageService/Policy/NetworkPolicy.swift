import ImageLoaderSupport

/// An IP address as the resolver returns it, version 4 or 6.
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    case v4(UInt8, UInt8, UInt8, UInt8)
    case v6([UInt8])  // 16 bytes

    /// Parses the standard text forms (`inet_pton`): dotted IPv4, and IPv6 with `::`
    /// and embedded IPv4. Anything else (a host name, `0x7f.1`, `2130706433`) is `nil`:
    /// such forms are names to the resolver, and the service checks what it resolves.
    public init?(_ text: String) {
        if let bytes = System.ipv4(text), bytes.count == 4 {
            self = .v4(bytes[0], bytes[1], bytes[2], bytes[3])
        } else if let bytes = System.ipv6(text) {
            self = .v6(bytes)
        } else {
            return nil
        }
    }

    /// The standard text form (`10.0.0.1`, `::1`).
    public var description: String {
        switch self {
        case .v4(let a, let b, let c, let d): return "\(a).\(b).\(c).\(d)"
        case .v6(let bytes):
            return System.ipv6Text(bytes) ?? "?"
        }
    }

    /// The IPv4 address an IPv6 one carries, for the forms that reach an IPv4 host:
    /// IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`),
    /// IPv4-compatible (`::a.b.c.d`, deprecated), NAT64 (`64:ff9b::a.b.c.d`) and 6to4
    /// (`2002:aabb:ccdd::`).
    /// The IPv4 client address a Teredo address (2001::/32) carries, obfuscated in its last bytes.
    var teredoIPv4: IPAddress? {
        guard case .v6(let b) = self, b.count == 16, b[0] == 0x20, b[1] == 0x01, b[2] == 0, b[3] == 0 else {
            return nil
        }
        return .v4(b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff)
    }

    var embeddedIPv4: IPAddress? {
        guard case .v6(let b) = self, b.count == 16 else { return nil }
        let zeros = b[0..<10].allSatisfy { $0 == 0 }
        if zeros && b[10] == 0xff && b[11] == 0xff { return .v4(b[12], b[13], b[14], b[15]) }
        if b[0..<8].allSatisfy({ $0 == 0 }) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0 {
            return .v4(b[12], b[13], b[14], b[15])
        }
        if zeros && b[10] == 0 && b[11] == 0 && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1) {
            return .v4(b[12], b[13], b[14], b[15])
        }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4..<12].allSatisfy({ $0 == 0 }) {
            return .v4(b[12], b[13], b[14], b[15])
        }
        if b[0] == 0x20 && b[1] == 0x02 { return .v4(b[2], b[3], b[4], b[5]) }
        return nil
    }
}

/// Which addresses a source may be fetched from. By default only public unicast
/// addresses: a URL naming (or resolving to, or redirecting to) a loopback, private,
/// link-local, shared (CGNAT), unique-local, multicast, reserved or unspecified
/// address is refused, so the service cannot be used to reach the network it runs in
/// (server-side request forgery).
///
/// ```swift
/// NetworkPolicy.publicOnly.allows(IPAddress("10.0.0.7")!)     // false
/// NetworkPolicy.publicOnly.allows(IPAddress("93.184.216.34")!) // true
/// ```
public struct NetworkPolicy: Sendable, Hashable {
    /// Also allow private and loopback addresses (`--allow-private-networks`; tests on 127.0.0.1).
    public var allowsPrivateNetworks: Bool
    /// Addresses allowed even though they are not public (`--allow-address`): one
    /// internal origin, without opening the whole network.
    public var allowedAddresses: Set<IPAddress>

    /// Also allow loopback and unspecified addresses (127.0.0.0/8, ::1, 0.0.0.0, ::),
    /// imgproxy's `IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES`.
    public var allowsLoopback = false
    /// Also allow link-local addresses (169.254.0.0/16, fe80::/10, and their multicast),
    /// imgproxy's `IMGPROXY_ALLOW_LINK_LOCAL_SOURCE_ADDRESSES`. Cloud metadata services
    /// live there: allow with care.
    public var allowsLinkLocal = false
    /// Also allow private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7),
    /// imgproxy's `IMGPROXY_ALLOW_PRIVATE_SOURCE_ADDRESSES`.
    public var allowsPrivate = false

    /// Public addresses only, plus `allowedAddresses`; every address when `allowsPrivateNetworks`.
    public init(allowsPrivateNetworks: Bool = false, allowedAddresses: Set<IPAddress> = []) {
        self.allowsPrivateNetworks = allowsPrivateNetworks
        self.allowedAddresses = allowedAddresses
    }

    /// Public addresses only: the default.
    public static let publicOnly = NetworkPolicy()

    /// Whether a connection to `address` is allowed. An IPv6 address that carries an
    /// IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is judged by that address.
    public func allows(_ address: IPAddress) -> Bool {
        if allowsPrivateNetworks || allowedAddresses.contains(address) || NetworkPolicy.isPublic(address) {
            return true
        }
        let judged = address.embeddedIPv4 ?? address.teredoIPv4 ?? address
        switch NetworkPolicy.kind(of: judged) {
        case .loopback: return allowsLoopback
        case .linkLocal: return allowsLinkLocal
        case .private: return allowsPrivate
        case nil: return false
        }
    }

    /// imgproxy's classes of addresses that are not public.
    enum Kind { case loopback, linkLocal, `private` }

    static func kind(of address: IPAddress) -> Kind? {
        switch address {
        case .v4(let a, let b, let c, let d):
            if a == 127 || (a == 0 && b == 0 && c == 0 && d == 0) { return .loopback }
            if a == 169 && b == 254 { return .linkLocal }
            if a == 224 && b == 0 && c == 0 { return .linkLocal }
            if a == 10 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168) { return .private }
            if a == 100 && (64...127).contains(b) { return .private }
            return nil
        case .v6(let bytes):
            guard bytes.count == 16 else { return nil }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] <= 1 { return .loopback }
            if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { return .linkLocal }
            if bytes[0] == 0xff && bytes[1] & 0x0f == 0x02 { return .linkLocal }
            if bytes[0] & 0xfe == 0xfc { return .private }
            return nil
        }
    }

    /// Whether `address` is a public unicast address.
    public static func isPublic(_ address: IPAddress) -> Bool {
        switch address {
        case .v4(let a, let b, let c, _):
            switch a {
            case 0, 10, 127: return false  // "this network", private, loopback
            case 100 where (64...127).contains(b): return false  // shared address space (CGNAT)
            case 169 where b == 254: return false  // link-local
            case 172 where (16...31).contains(b): return false  // private
            case 192 where b == 168: return false  // private
            case 192 where b == 0 && (c == 0 || c == 2): return false  // IETF assignments, TEST-NET-1
            case 198 where b == 18 || b == 19: return false  // benchmarking
            case 198 where b == 51 && c == 100, 203 where b == 0 && c == 113: return false  // TEST-NET-2, -3
            case 224...255: return false  // multicast, reserved, broadcast
            default: return true
            }
        case .v6(let bytes):
            guard bytes.count == 16 else { return false }
            if let v4 = address.embeddedIPv4 { return isPublic(v4) }
            if bytes.allSatisfy({ $0 == 0 }) { return false }  // ::
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return false }  // ::1
            if bytes[0] & 0xfe == 0xfc { return false }  // fc00::/7 unique local
            if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { return false }  // fe80::/10 link-local
            if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0xc0 { return false }  // fec0::/10 site-local (deprecated)
            if bytes[0] == 0xff { return false }  // multicast
            if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0d && bytes[3] == 0xb8 { return false }  // documentation
            if bytes[0] == 0x01 && bytes[1..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
            // Teredo (2001::/32): tunnelled to an IPv4 host the address hides, through relays.
            if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0 && bytes[3] == 0 { return false }
            // NAT64 for local use (64:ff9b:1::/48): translates to addresses of the operator's choosing.
            if bytes[0] == 0 && bytes[1] == 0x64 && bytes[2] == 0xff && bytes[3] == 0x9b && bytes[4] == 0
                && bytes[5] == 1
            {
                return false
            }
            return true
        }
    }
}
