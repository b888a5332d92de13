import Testing

@testable import ImageService

@Suite("Which addresses a source may be fetched from")
struct NetworkPolicyTests {
    @Test("loopback, private, link-local, CGNAT, unique-local, multicast and their IPv6 forms are refused")
    func refused() throws {
        let refused = [
            "127.0.0.1", "127.255.255.254", "0.0.0.0", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
            "192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.255", "192.0.0.8", "192.0.2.1",
            "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
            "255.255.255.255",
            "::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1", "ff02::1", "2001:db8::1",
            "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::10.0.0.1",
            "64:ff9b::7f00:1", "2002:7f00:1::", "2002:a9fe:a9fe::1", "100::1",
            "::ffff:0:127.0.0.1", "::ffff:0:a00:1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1",
            "64:ff9b:1::808:808",
        ]
        for text in refused {
            let address = try #require(IPAddress(text), "\(text)")
            #expect(!NetworkPolicy.publicOnly.allows(address), "\(text) allowed")
            #expect(NetworkPolicy(allowsPrivateNetworks: true).allows(address))
        }
    }

    @Test("public addresses, and their IPv6 forms, are allowed")
    func allowed() throws {
        let allowed = [
            "93.184.216.34", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.15.255.255", "172.32.0.1",
            "192.167.1.1", "169.253.0.1", "11.0.0.1", "223.255.255.254",
            "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:93.184.216.34", "64:ff9b::808:808",
            "2002:5db8:d822::1", "::ffff:0:808:808", "2001:4860:4860::8888",
        ]
        for text in allowed {
            let address = try #require(IPAddress(text), "\(text)")
            #expect(NetworkPolicy.publicOnly.allows(address), "\(text) refused")
        }
    }

    @Test("only standard text forms are addresses; the rest are names for the resolver")
    func textForms() {
        for name in ["0x7f.1", "2130706433", "127.1", "localhost", "example.com", "", "1.2.3.4.5", "::ffff:999.0.0.1"] {
            #expect(IPAddress(name) == nil, "\(name)")
        }
        #expect(IPAddress("::ffff:127.0.0.1")?.description == "::ffff:127.0.0.1")
        #expect(IPAddress("10.1.2.3")?.description == "10.1.2.3")
    }
}
