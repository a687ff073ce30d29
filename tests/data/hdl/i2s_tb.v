// An I2S transmitter (a codec's DAC input): a master clock (mclk, 12.288 MHz), the bit clock
// divided from it (bclk, 64 per frame), the word select (lrclk) and the serial data (sd),
// 16-bit samples in 32-bit slots, left and right; 1 ps timescale, a hierarchy.
`timescale 1ns / 1ps

module i2s_tx (
    input wire mclk, rst_n,
    output reg bclk, output reg lrclk, output reg sd
);
    reg [1:0] div;
    reg [4:0] slot_bit;
    reg [15:0] left, right, sh;
    always @(posedge mclk or negedge rst_n)
        if (!rst_n) begin div <= 0; bclk <= 0; lrclk <= 0; sd <= 0; slot_bit <= 0; left <= 16'h1234; right <= 16'hfedc; end
        else begin
            div <= div + 1;
            if (div == 1) bclk <= 1;
            if (div == 3) begin                   // the bit clock's falling edge: next bit out
                bclk <= 0;
                slot_bit <= slot_bit + 1;
                if (slot_bit == 31) begin
                    lrclk <= ~lrclk;
                    if (lrclk) begin left <= left + 16'h0321; right <= right - 16'h0123; end
                end
                // one bit clock after the word select changes, the sample's MSB (I2S)
                if (slot_bit == 0) sh <= lrclk ? right : left;
                sd <= (slot_bit == 0) ? (lrclk ? right[15] : left[15]) : (slot_bit <= 15 ? sh[15 - slot_bit] : 1'b0);
            end
        end
endmodule

module tb;
    reg mclk = 0, rst_n = 0;
    wire bclk, lrclk, sd;
    always #40.69 mclk = ~mclk;
    i2s_tx u_dac_if (.mclk(mclk), .rst_n(rst_n), .bclk(bclk), .lrclk(lrclk), .sd(sd));
    initial begin
        $dumpfile("i2s_tb.vcd");
        $dumpvars(0, tb);
        #100 rst_n = 1;
        #200000 $finish;
    end
endmodule
