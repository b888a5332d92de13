import RasterImage

print(try ImageDecoder().info(.file(path: CommandLine.arguments[1])))
