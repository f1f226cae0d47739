// Writes the payload of a v2 batch as kafka-clients compresses it, per codec, and reads
// back files written by es (args: out-dir, es-dir).
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

public class KafkaVectors {
    static byte[] plaintext() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 1500; i++) {
            sb.append(String.format("record %05d key-%02d value %s\n", i, i % 97, "x".repeat(i % 53)));
        }
        return sb.toString().getBytes();
    }
    static Compression of(String name) {
        switch (name) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            default: return Compression.zstd().build();
        }
    }
    public static void main(String[] args) throws Exception {
        byte[] p = plaintext();
        for (String name : new String[] {"gzip", "snappy", "lz4", "zstd"}) {
            ByteBufferOutputStream out = new ByteBufferOutputStream(1024);
            try (OutputStream os = of(name).wrapForOutput(out, RecordBatch.MAGIC_VALUE_V2)) { os.write(p); }
            ByteBuffer b = out.buffer(); b.flip();
            byte[] bytes = new byte[b.remaining()]; b.get(bytes);
            Files.write(Paths.get(args[0], name + ".kafka-clients-3.9.1.bin"), bytes);
            System.out.println(name + ": " + bytes.length + " bytes");
            Path es = Paths.get(args[1], "es." + name + ".bin");
            if (Files.exists(es)) {
                ByteBuffer in = ByteBuffer.wrap(Files.readAllBytes(es));
                try (InputStream is = of(name).wrapForInput(in, RecordBatch.MAGIC_VALUE_V2, BufferSupplier.NO_CACHING)) {
                    byte[] back = is.readAllBytes();
                    System.out.println("  es." + name + ".bin read by kafka-clients: " + (java.util.Arrays.equals(back, p) ? "equal" : "DIFFERENT"));
                }
            }
        }
    }
}
