/// How the channels of the rows a resize receives relate to their fourth channel.
enum RowChannels {
    /// RGBA with straight alpha: premultiplied on the way in, divided out on the way out.
    case straightAlpha
    /// RGBA already premultiplied, or opaque, or four channels that are not colour
    /// and alpha (CMYK): all four are filtered alike.
    case independent
}
